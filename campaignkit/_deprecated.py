"""Old names kept working for a while, with a ``DeprecationWarning``."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping


def renamed(module: str, names: Mapping[str, tuple[str, object]]) -> Callable[[str], object]:
    """A module ``__getattr__`` giving each old name of ``names`` (old name ->
    (what to use instead, its value)) with a ``DeprecationWarning``."""

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        instead, value = names[name]
        warnings.warn(
            f"{module}.{name} is deprecated: use {instead}", DeprecationWarning, stacklevel=2
        )
        return value

    return __getattr__
