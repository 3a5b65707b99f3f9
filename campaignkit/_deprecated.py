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


def renamed_attribute(cls: str, old: str, new: str) -> property:
    """A read-only property ``old`` giving the attribute ``new`` with a
    ``DeprecationWarning`` (``cls``: the class's name, for the message)."""

    def get(self: object) -> object:
        warnings.warn(
            f"{cls}.{old} is deprecated: use {cls}.{new}", DeprecationWarning, stacklevel=2
        )
        return getattr(self, new)

    return property(get, doc=f"Deprecated: :attr:`{new}`.")
