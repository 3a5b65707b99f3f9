"""Numbers of a prefix failing at a chosen rate (``/_sandbox/failures``).

A rule ``{prefix, rate, status}`` makes that share of the numbers starting
with ``prefix`` end in ``status`` (along the path its magic number walks).
Whether a number fails is a pure function of the rule's seed and the number,
so a rerun, another launch or another sandbox of the same seed sees the same
numbers fail; and a higher rate keeps failing those a lower one failed. Only
numbers that would otherwise be delivered are drawn: a magic number
(``99NN``), an invalid one or an unknown sending line keeps its outcome.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import attrs

from ..status import DeploymentStatus
from ._outcomes import STATUSES

__all__ = ["RULE_FIELDS", "InvalidFailure", "PrefixFailures"]

_PREFIX = re.compile(r"\+[0-9]{1,15}")
RULE_FIELDS = ("prefix", "rate", "status", "seed")
_SPAN = float(2**64)
_FAILURE_STATUSES = tuple(status.value for status in STATUSES if status.is_failure)


class InvalidFailure(ValueError):
    """A failure rule sent to the admin route is not valid; the text names the field."""


@attrs.define
class _Rule:
    prefix: str
    rate: float
    status: DeploymentStatus
    seed: int
    # Numbers of the prefix drawn (that would otherwise be delivered), and
    # of those how many fail: a test reads the share it got.
    drawn: int = 0
    failed: int = 0
    outcome: int = attrs.field(init=False)
    # The hash of the seed, copied per number: this runs per user of a send.
    _seeded: Any = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.outcome = STATUSES.index(self.status)
        self._seeded = hashlib.blake2b(f"{self.seed}:".encode(), digest_size=8)

    def fails(self, phone: str) -> bool:
        """Whether ``phone`` falls under the rate: its hash with the seed,
        read as a share of ``[0, 1)``, is below it."""
        self.drawn += 1
        hashed = self._seeded.copy()
        hashed.update(phone.encode())
        if int.from_bytes(hashed.digest()) / _SPAN < self.rate:
            self.failed += 1
            return True
        return False

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "rate": self.rate,
            "status": self.status.value,
            "seed": self.seed,
            "drawn": self.drawn,
            "failed": self.failed,
        }


def _rule(body: dict[str, Any], default_seed: int) -> _Rule:
    prefix, rate = body.get("prefix"), body.get("rate")
    status, seed = body.get("status", DeploymentStatus.FAILURE.value), body.get("seed")
    if not (isinstance(prefix, str) and _PREFIX.fullmatch(prefix)):
        raise InvalidFailure(
            f"prefix must be + and 1 to 15 digits, country code first (e.g. +57300), not {prefix!r}"
        )
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise InvalidFailure(f"rate must be a number from 0 to 1, not {rate!r}")
    if status not in _FAILURE_STATUSES:
        raise InvalidFailure(
            f"status must be a failure status of the spec's table (e.g. FAILURE, "
            f"FAILURE_BY_META_CHOSE_NOT_DELIVER), not {status!r}"
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidFailure(f"seed must be an integer, not {seed!r}")
    seed = default_seed if seed is None else seed
    return _Rule(prefix, float(rate), DeploymentStatus(status), seed)


class PrefixFailures:
    """The active rules, one per prefix; the longest prefix of a number applies."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rules: dict[str, _Rule] = {}
        self._longest_first: tuple[_Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self._rules)

    def set(self, body: dict[str, Any]) -> dict[str, Any]:
        """Add the rule of ``{prefix, rate, status?, seed?}``, replacing the
        prefix's own; ``status`` defaults to ``FAILURE``, ``seed`` to the
        sandbox's."""
        rule = _rule(body, self._seed)
        self._rules[rule.prefix] = rule
        self._longest_first = tuple(sorted(self._rules.values(), key=lambda r: -len(r.prefix)))
        return rule.to_json()

    def clear(self) -> None:
        self._rules = {}
        self._longest_first = ()

    def outcome(self, phone: str, delivered: int) -> int:
        """The outcome (index into ``OUTCOMES``) of ``phone`` (country code
        and cellphone as sent), which would otherwise be ``delivered``."""
        for rule in self._longest_first:
            if phone.startswith(rule.prefix):
                return rule.outcome if rule.fails(phone) else delivered
        return delivered

    def to_json(self) -> dict[str, Any]:
        return {"failures": [rule.to_json() for rule in self._rules.values()]}
