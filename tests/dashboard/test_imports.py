"""What the dashboard, the tracker and the analysis share with the rest of
the package goes through their public names (issue 32): the CLI and the
poll analysis took pieces from ``dashboard._runs``, ``_html``, ``_report``
and ``_svg``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "campaignkit"
OWNED = ("dashboard", "tracker", "analysis")


def imported_modules(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """The modules (and names) ``path`` imports, relative ones resolved
    from ``root``, the directory holding the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    here = parts if path.name == "__init__.py" else parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("owner", OWNED)
def test_no_module_outside_a_package_imports_its_private_modules(owner: str) -> None:
    private = f"campaignkit.{owner}._"
    inside = PACKAGE / owner
    crossing = sorted(
        f"{path.relative_to(PACKAGE.parent)} -> {module}"
        for path in PACKAGE.rglob("*.py")
        if inside not in path.parents
        for module in imported_modules(path)
        if module.startswith(private)
    )
    assert crossing == []


def test_relative_and_absolute_imports_are_resolved(tmp_path: Path) -> None:
    cli = tmp_path / "campaignkit" / "cli"
    cli.mkdir(parents=True)
    (cli / "watch.py").write_text(
        "from ..dashboard._runs import PollNames\n"
        "from ..dashboard import _svg\n"
        "import campaignkit.tracker._pacer\n"
        "from . import output\n"
    )
    found = imported_modules(cli / "watch.py", tmp_path)
    assert {
        "campaignkit.dashboard._runs",
        "campaignkit.dashboard._svg",
        "campaignkit.tracker._pacer",
        "campaignkit.cli.output",
    } <= found
