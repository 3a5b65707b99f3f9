"""Errors kept in a ledger as text (``detail``) and rebuilt as their class.

A detail reads ``<ErrorClass>: <message>``, which people read in exports and
which rebuilds the error a report gives back: a 404 read from the ledger is a
:class:`~campaignkit.errors.NotFoundError` with its status, method and URL,
as the ``send_bulk`` that met it saw it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from .. import errors
from ..models import User

_CLASSES: Final = {
    cls.__name__: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.CampaignKitError)
}
_API: Final = re.compile(
    r"(?P<method>[A-Z]+) (?P<url>\S+) -> (?P<status>\d{3}): (?P<said>.*)", re.S
)


def error_detail(exc: BaseException) -> str:
    """How the ledger keeps ``exc``."""
    return f"{type(exc).__name__}: {exc}"


def error_from_detail(detail: str, *, users: Sequence[User] = ()) -> errors.CampaignKitError:
    """The error ``detail`` was written from, of its class where it names one
    (a bare :class:`~campaignkit.errors.CampaignKitError` otherwise)."""
    name, colon, message = detail.partition(": ")
    cls = _CLASSES.get(name) if colon else None
    if cls is None:
        return errors.CampaignKitError(detail)
    if issubclass(cls, errors.APIError):
        api = _API.fullmatch(message)
        if api is None:
            return errors.CampaignKitError(detail)
        said = api["said"]
        return cls(int(api["status"]), api["method"], api["url"], said, detail=said)
    if issubclass(cls, errors.ConnectionError | errors.TimeoutError):
        return cls(message, request_sent=True)
    if issubclass(cls, errors.AmbiguousSendError | errors.ResponseError):
        return cls(message, users=users)
    if issubclass(cls, errors.ValidationError):
        return cls([("", message)])
    return cls(message)
