"""The package's shape (issue 14), read from the AST of every module: no import
cycle, no module importing another's underscored names nor another package's
private module, no module over 800 lines: a module holds one concept whole,
and no cap splits a class.

A cycle counts imports inside functions too (a lazy import that closes a cycle
is still a cycle); only ``if TYPE_CHECKING:`` imports are exempt from it.
Importing ``pkg.mod`` counts as importing ``pkg.mod``, not also ``pkg``'s
``__init__`` (which Python runs first, but which every submodule would then
cycle through).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "campaignkit"
MAX_LINES = 800

Graph = dict[str, set[str]]


def modules_of(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(tree: ast.AST, *, type_checking: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement anywhere in ``tree`` (function bodies included);
    those under ``if TYPE_CHECKING:`` only when ``type_checking``."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def _imported_from(modules: dict[str, Path], module: str, node: ast.ImportFrom) -> str:
    """The absolute name of what ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _owner(modules: dict[str, Path], name: str) -> str | None:
    """The module ``name`` is, or is defined in (None outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def import_graph(modules: dict[str, Path], *, type_checking: bool = False) -> Graph:
    """Which modules of the package each module imports (TYPE_CHECKING aside,
    unless ``type_checking``)."""
    graph: Graph = {}
    for module, path in modules.items():
        targets: set[str | None] = set()
        for node in imports_of(_parse(path), type_checking=type_checking):
            if isinstance(node, ast.Import):
                targets.update(_owner(modules, alias.name) for alias in node.names)
            else:
                base = _imported_from(modules, module, node)
                targets.update(_owner(modules, f"{base}.{alias.name}") for alias in node.names)
        graph[module] = {target for target in targets if target is not None}
    return graph


def cycle_through(graph: Graph, module: str) -> list[str] | None:
    """A shortest import path from ``module`` back to itself, if there is one."""
    came_from: dict[str, str] = {}
    queue = deque([module])
    while queue:
        current = queue.popleft()
        for target in sorted(graph[current]):
            if target == module:
                path = [current]
                while path[-1] != module:
                    path.append(came_from[path[-1]])
                return [*reversed(path), module]
            if target not in came_from:
                came_from[target] = current
                queue.append(target)
    return None


def private_names_imported(modules: dict[str, Path], module: str) -> list[str]:
    """The underscored names (not modules, not dunders) ``module`` imports."""
    found = []
    for node in imports_of(_parse(modules[module]), type_checking=True):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _imported_from(modules, module, node)
        for alias in node.names:
            name = alias.name
            private = name.startswith("_") and not name.endswith("__")
            if private and f"{base}.{name}" not in modules:
                found.append(f"{base}.{name}")
    return sorted(found)


def private_holder(name: str) -> str | None:
    """The package that holds the private module ``name`` is, or is under
    (``campaignkit.ledger`` for ``campaignkit.ledger._store``; None when no
    part of ``name`` is underscored, dunders such as ``__main__`` aside)."""
    parts = name.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:index])
    return None


def private_modules_crossed(graph: Graph, module: str) -> list[str]:
    """The private modules of other packages that ``module`` imports."""
    crossed = []
    for target in graph[module]:
        holder = private_holder(target)
        if holder is not None and module != holder and not module.startswith(holder + "."):
            crossed.append(target)
    return sorted(crossed)


MODULES = modules_of(ROOT)
GRAPH = import_graph(MODULES)
TYPED_GRAPH = import_graph(MODULES, type_checking=True)


@pytest.mark.parametrize("module", list(MODULES))
def test_no_import_cycle(module: str) -> None:
    cycle = cycle_through(GRAPH, module)
    assert cycle is None, " -> ".join(cycle)


def reaches(graph: Graph, start: str, goal: str) -> bool:
    seen, queue = {start}, deque([start])
    while queue:
        for target in graph[queue.popleft()]:
            if target == goal:
                return True
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return False


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("campaignkit.bulk")])
def test_bulk_never_imports_the_client(module: str) -> None:
    """The client imports ``bulk``; ``bulk`` sees the client through a protocol
    only, not even for type checking: no ``client <-> bulk`` cycle."""
    assert reaches(TYPED_GRAPH, "campaignkit.client", module)
    assert not reaches(TYPED_GRAPH, module, "campaignkit.client")


@pytest.mark.parametrize("module", list(MODULES))
def test_no_private_names_imported(module: str) -> None:
    assert private_names_imported(MODULES, module) == []


@pytest.mark.parametrize("module", list(MODULES))
def test_no_private_module_of_another_package_imported(module: str) -> None:
    """``pkg._x`` (and what is under it) is imported only from inside ``pkg``,
    the package that holds it: another package reads ``pkg`` through its
    ``__init__``. So the root's private modules (``campaignkit._wire``,
    ``campaignkit._io``, ``campaignkit._version``...) are held by
    ``campaignkit`` and every module of the package may import them: they are
    the core's internals, below every subpackage. ``campaignkit.ledger._x`` is
    the ledger's own: not for ``bulk/``, ``cli/`` or ``workers/``. Every import
    counts: relative, absolute, inside a function, under ``TYPE_CHECKING``."""
    crossed = set(private_modules_crossed(TYPED_GRAPH, module))
    assert sorted(crossed) == []


WIRE = [module for module in MODULES if module.startswith("campaignkit._wire")]
CORE = {f"campaignkit.{name}" for name in ("models", "errors", "config", "status", "_version")}


@pytest.mark.parametrize("module", WIRE)
def test_the_wire_layer_does_no_io(module: str) -> None:
    """The wire layer reads only the core and the input layer, and no I/O library."""
    imported = {
        alias.name if isinstance(node, ast.Import) else _imported_from(MODULES, module, node)
        for node in imports_of(_parse(MODULES[module]), type_checking=True)
        for alias in node.names
    }
    assert not {name for name in imported if name.split(".")[0] in {"aiohttp", "asyncio"}}
    allowed = ("campaignkit._wire", "campaignkit._input")
    assert {target for target in GRAPH[module] if not target.startswith(allowed)} <= CORE


def plain_loggers(tree: ast.AST) -> list[int]:
    """Lines where a logger is taken with ``logging.getLogger`` and kept in a
    name: its records would miss the redacting filter of ``sdk_logger``."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "logging.getLogger"
    ]


@pytest.mark.parametrize("module", [m for m in MODULES if m != "campaignkit._redaction"])
def test_every_logger_redacts_the_key(module: str) -> None:
    assert plain_loggers(_parse(MODULES[module])) == []


def test_a_plain_logger_is_found() -> None:
    tree = ast.parse("import logging\nlog = logging.getLogger('x')\nok = sdk_logger('x')\n")
    assert plain_loggers(tree) == [2]


@pytest.mark.parametrize("module", list(MODULES))
def test_module_size(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{lines} lines"


# -- the checks themselves, on a package written for them ------------------------


@pytest.fixture
def toy(tmp_path: Path) -> dict[str, Path]:
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "from .b import B\nA = 1\n",
        "b.py": "B = 2\ndef later():\n    from . import a\n",
        "c.py": (
            "from typing import TYPE_CHECKING\n"
            "from . import _hidden\n"
            "from ._hidden import Public, _secret, __dunder__\n"
            "if TYPE_CHECKING:\n    from .d import D, _Private\n    from .sub._inner import X\n"
        ),
        "d.py": "import toy.c\nD = 4\ndef later():\n    from toy.sub import _inner\n",
        "_hidden.py": "Public = _secret = __dunder__ = 0\n",
        "sub/__init__.py": "",
        "sub/e.py": "from ..a import A\nfrom .. import c, _hidden\nfrom ._inner import X\n",
        "sub/_inner.py": "X = 5\n",
        "f.py": "import toy.sub._inner\nimport toy.__main__\n",
        "__main__.py": "",
    }
    for name, text in files.items():
        (tmp_path / "toy" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "toy" / name).write_text(text)
    return modules_of(tmp_path / "toy")


def test_the_graph_resolves_relative_lazy_and_type_checking_imports(
    toy: dict[str, Path],
) -> None:
    assert import_graph(toy) == {
        "toy": {"toy.a"},
        "toy.a": {"toy.b"},
        "toy.b": {"toy.a"},
        "toy.c": {"toy._hidden"},
        "toy.d": {"toy.c", "toy.sub._inner"},
        "toy.f": {"toy.sub._inner", "toy.__main__"},
        "toy._hidden": set(),
        "toy.__main__": set(),
        "toy.sub": set(),
        "toy.sub._inner": set(),
        "toy.sub.e": {"toy.a", "toy.c", "toy._hidden", "toy.sub._inner"},
    }


def test_a_lazy_import_closing_a_cycle_is_found(toy: dict[str, Path]) -> None:
    graph = import_graph(toy)
    assert cycle_through(graph, "toy.a") == ["toy.a", "toy.b", "toy.a"]
    assert cycle_through(graph, "toy") is None
    assert cycle_through(graph, "toy.d") is None  # toy.c imports toy.d for types only


def test_private_names_but_not_private_modules_are_found(toy: dict[str, Path]) -> None:
    assert private_names_imported(toy, "toy.c") == ["toy._hidden._secret", "toy.d._Private"]
    assert private_names_imported(toy, "toy.sub.e") == []


def test_a_private_module_imported_from_another_package_is_found(toy: dict[str, Path]) -> None:
    graph = import_graph(toy, type_checking=True)
    # toy.sub._inner is toy.sub's: reached for types (c), lazily and absolutely
    # (d), by a plain import (f); toy.sub.e is inside toy.sub.
    assert private_modules_crossed(graph, "toy.c") == ["toy.sub._inner"]
    assert private_modules_crossed(graph, "toy.d") == ["toy.sub._inner"]
    assert private_modules_crossed(graph, "toy.f") == ["toy.sub._inner"]
    assert private_modules_crossed(graph, "toy.sub.e") == []
    # The root's private module is toy's: every module of toy may import it.
    assert "toy._hidden" in graph["toy.sub.e"]
    assert private_holder("toy._hidden") == "toy"
    assert private_holder("toy.__main__") is None
