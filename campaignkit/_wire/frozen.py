"""Frozen attrs objects made without their generated ``__init__``: for the few
made on every call (benchmarks row 3), the I/O seam's request and answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


def field_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of the frozen slotted attrs class ``cls``'s fields, in order.

    ``object.__new__(cls)`` with each field set through these is the object
    ``cls(*values)`` makes (equal, hashed, shown and frozen alike) in about
    three quarters of the time: the generated ``__init__`` sets each field
    through ``object.__setattr__``, which looks the slot up by name. Only for a class
    whose ``__init__`` does nothing else (no converter, validator, pre- or
    post-init hook), which is checked here.
    """
    fields = attrs.fields(cls)
    hooks = hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__")
    if hooks or any(field.converter or field.validator or not field.init for field in fields):
        raise TypeError(f"{cls.__name__}.__init__ does more than set its fields")
    return tuple(cls.__dict__[field.name].__set__ for field in fields)
