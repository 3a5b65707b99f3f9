"""The one place API keys are taken out of text: every error, log line,
dashboard page, report and CLI output of the SDK goes through :func:`redact`.

Each key a :class:`~campaignkit.ClientConfig` is built with is registered here
(by value, for the life of the process, never printed). :func:`redact` masks,
wherever they appear (also in bodies a service, gateway or proxy echoes back):

- any run of :data:`FRAGMENT` or more characters of a registered key, of its
  percent-encoded form or of its base64 forms (so the whole key, a truncated
  copy or its distinctive part);
- any token shaped like the service's keys (``ak_`` and 24 or more URL-safe
  characters), registered or not;
- both of these also where JSON escapes spell them (``\\u0061k_...``, ``\\/``,
  surrogate pairs, in any mix), as ``json.loads`` of an echoed body would
  read them back.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "redact", "register", "sdk_logger"]

MASK = "***"
FRAGMENT = 12
"""The shortest run of a key's characters that is masked (shorter keys: whole)."""

# Every run of FRAGMENT characters of a form holds one of its BLOCK-long
# slices at an offset that is a multiple of BLOCK: a lookup of each BLOCK-long
# slice of the text finds every candidate, which is then grown to its full run.
_BLOCK = FRAGMENT // 2
_KEY_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])ak_[A-Za-z0-9_-]{24,}")
# One JSON escape: a surrogate pair (one character), a \uXXXX or a short one.
_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)
_SHORT = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_lock = threading.Lock()
_keys: set[str] = set()


class _Index:
    """Where each block of every registered form lies: ``(form, offset,
    shortest run masked)``. Only runs of the characters keys are made of, as
    long as the shortest masked run, are looked into."""

    def __init__(self, blocks: dict[str, tuple[tuple[str, int, int], ...]]) -> None:
        self.blocks = blocks
        self.keys = frozenset(blocks)
        self.sizes = sorted({len(block) for block in blocks})
        alphabet = "".join(sorted(set("".join(blocks))))
        shortest = min(run for entries in blocks.values() for _, _, run in entries)
        self.runs = re.compile(f"[{re.escape(alphabet)}]{{{shortest},}}+")  # possessive: faster

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where runs of registered key material lie in ``text``."""
        spans: list[tuple[int, int]] = []
        for word in self.runs.finditer(text):
            found = word.group()
            hits = []
            for size in self.sizes:
                grams = {found[i : i + size] for i in range(len(found) - size + 1)}
                for block in self.keys & grams:
                    at = found.find(block)
                    while at >= 0:
                        hits.append((word.start() + at, block))
                        at = found.find(block, at + 1)
            for start, block in sorted(hits):
                if spans and spans[-1][0] <= start and start + len(block) <= spans[-1][1]:
                    continue  # inside what is already masked
                for form, offset, run in self.blocks[block]:
                    left, right = _grown(text, start, len(block), form, offset)
                    if right - left >= run:
                        spans.append((left, right))
        return spans


def _grown(text: str, start: int, size: int, form: str, offset: int) -> tuple[int, int]:
    """The longest run around ``text[start:start + size]`` equal to ``form``
    around ``form[offset:offset + size]`` (binary searches on slices)."""
    low, high = size, min(len(text) - start, len(form) - offset)
    while low < high:
        middle = (low + high + 1) // 2
        if text[start : start + middle] == form[offset : offset + middle]:
            low = middle
        else:
            high = middle - 1
    right = start + low
    low, high = 0, min(start, offset)
    while low < high:
        middle = (low + high + 1) // 2
        if text[start - middle : start] == form[offset - middle : offset]:
            low = middle
        else:
            high = middle - 1
    return start - low, right


# Swapped whole (never changed in place), so a reader needs no lock.
_index: _Index | None = None


def _forms(key: str) -> set[str]:
    """The key as it may travel: raw, percent-encoded, base64 at each of the
    three byte alignments (without the edge characters its neighbours change)."""
    forms = {key, quote(key, safe=""), quote_plus(key)}
    raw = key.encode()
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + raw).decode().rstrip("=")
            forms.add(text[4 if pad else 0 : -4])
    return {form for form in forms if form}


def register(key: str | None) -> None:
    """Mask ``key`` (and its forms) from now on. Keys shorter than 4
    characters are ignored: masking them would mangle every text."""
    global _index
    if not key or len(key) < 4 or key in _keys:
        return
    with _lock:
        if key in _keys:
            return
        blocks = dict(_index.blocks) if _index is not None else {}
        for form in _forms(key):
            run = min(FRAGMENT, len(key)) if form == key else FRAGMENT
            if len(form) < run:
                continue
            size = min(_BLOCK, run)
            for offset in range(0, len(form) - size + 1, size):
                block = form[offset : offset + size]
                blocks[block] = (*blocks.get(block, ()), (form, offset, run))
        _index = _Index(blocks)
        _keys.add(key)


def _unescaped(text: str) -> tuple[str, list[int], list[int]] | None:
    """``text`` with its JSON escapes decoded, and where each of its
    characters starts and ends in ``text``; None if it holds no escape."""
    if not _ESCAPE.search(text):
        return None
    view: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    last = 0
    for escape in _ESCAPE.finditer(text):
        view += text[last : escape.start()]
        starts += range(last, escape.start())
        ends += range(last + 1, escape.start() + 1)
        high, low, code, short = escape.groups()
        if high is not None:
            view.append(chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00))
        elif code is not None:
            view.append(chr(int(code, 16)))
        else:
            view.append(_SHORT.get(short, short))
        starts.append(escape.start())
        ends.append(escape.end())
        last = escape.end()
    view += text[last:]
    starts += range(last, len(text))
    ends += range(last + 1, len(text) + 1)
    return "".join(view), starts, ends


def _key_spans(index: _Index | None, text: str) -> list[tuple[int, int]]:
    spans = index.spans(text) if index is not None else []
    if "ak_" in text:
        spans += (token.span() for token in _KEY_SHAPE.finditer(text))
    return spans


def redact(text: str) -> str:
    """``text`` with every registered key's material and every key-shaped
    token replaced by :data:`MASK`, also where JSON escapes spell them."""
    index = _index
    spans = _key_spans(index, text)
    if "\\" in text and (unescaped := _unescaped(text)) is not None:
        view, starts, ends = unescaped
        spans += ((starts[left], ends[right - 1]) for left, right in _key_spans(index, view))
    if spans:
        merged: list[tuple[int, int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        pieces = []
        last = 0
        for start, end in merged:
            pieces += [text[last:start], MASK]
            last = end
        text = "".join(pieces) + text[last:]
    return text


class _RedactingFilter(logging.Filter):
    """Formats the record's message, traceback and stack once, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = _RedactingFilter()


def sdk_logger(name: str) -> logging.Logger:
    """The logger ``name`` with the redacting filter: every module of the SDK
    that logs takes its logger from here (a filter on a parent logger would
    not see its children's records)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
