"""Row 12: what redacting the API key costs (issue 18), against floors
measured in the same run (one registered key, as a client registers it).

- 12a a DEBUG record through an SDK logger (the redacting filter) vs the same
  record through a plain logger, both formatted by a handler;
- 12b an ``APIError`` as the service sends them (redacted when built) vs an
  exception holding and formatting the same fields without redaction;
- 12c the same with a body that echoes the key (the worst case: it is found
  and masked in the body, the detail and the message);
- 12d redacting a 64 KiB HTML error body (no key in it) vs decoding it.
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Callable

from campaignkit._redaction import redact, register, sdk_logger
from campaignkit.errors import APIError

from ._harness import Row, ab_sync, time_ratio

KEY = "ak_Q3vX9kLm2Pz8Rt5Yw1Nb7Hc4Jd6Fg0Se2Ua"
URL = "https://campaigns.example.com/v2/send-campaign/1001"
DETAIL = "no poll with this id exists for the company"
ECHO = f"bad header Authorization: {KEY}"
PAGE = ("<html><body><h1>502 Bad Gateway</h1><p>upstream timed out</p></body></html>\n" * 820)[
    : 64 * 1024
].encode()


class _Unredacted(Exception):
    """The floor of 12b: APIError's fields and summary, nothing redacted."""

    def __init__(self, status: int, method: str, url: str, body: str, detail: str) -> None:
        self.status, self.method, self.url, self.body, self.detail = (
            status,
            method,
            url,
            body,
            detail,
        )
        super().__init__(f"{method} {url} -> {status}: {detail}")


def _handled(logger: logging.Logger) -> logging.Logger:
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger


def run(quick: bool) -> list[Row]:
    register(KEY)
    count = 2_000 if quick else 50_000
    pages = 20 if quick else 200
    rounds = 3 if quick else 9
    plain = _handled(logging.getLogger("benchmarks.redaction"))
    redacting = _handled(sdk_logger("campaignkit.benchmarks"))

    def log(logger: logging.Logger) -> None:
        for attempt in range(count):
            logger.debug("%s %s -> %s attempt=%d", "POST", URL, 503, attempt)

    def errors(build: Callable[..., Exception], detail: str) -> None:
        body = f'{{"detail": "{detail}"}}'
        for _ in range(count):
            str(build(401, "POST", URL, body, detail=detail))

    def read(redacting: bool) -> None:
        for _ in range(pages):
            text = PAGE.decode()
            if redacting:
                redact(text)

    assert KEY not in str(APIError(401, "POST", URL, ECHO, detail=ECHO))
    rows = []
    floor, sdk = ab_sync(lambda: log(plain), lambda: log(redacting), rounds)
    rows.append(
        time_ratio(
            "12a DEBUG record, redacting filter vs none",
            floor,
            sdk,
            None,
            figures={"extra_us_per_record": (sdk.median - floor.median) / count * 1e6},
        )
    )
    for name, detail in (("12b APIError", DETAIL), ("12c APIError echoing the key", ECHO)):
        floor, sdk = ab_sync(
            functools.partial(errors, _Unredacted, detail),
            functools.partial(errors, APIError, detail),
            rounds,
        )
        rows.append(
            time_ratio(
                f"{name}, redacted vs not",
                floor,
                sdk,
                None,
                figures={"extra_us_per_error": (sdk.median - floor.median) / count * 1e6},
            )
        )
    floor, sdk = ab_sync(lambda: read(False), lambda: read(True), rounds)
    rows.append(
        time_ratio(
            "12d 64 KiB HTML error body: decoded and redacted vs decoded",
            floor,
            sdk,
            None,
            figures={"extra_us_per_body": (sdk.median - floor.median) / pages * 1e6},
        )
    )
    return rows
