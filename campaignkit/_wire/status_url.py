"""Where a tracker polls: a ``status_url`` or a launch request id made a URL
on the ``campaign_url``'s origin, never another host's (the key goes with it)."""

from __future__ import annotations

from urllib.parse import SplitResult, quote, unquote, urlsplit

from .. import errors
from .._input.validation import path_segment, raise_problems
from ..models import CampaignAck


def resolve_status_url(campaign_url: str, target: CampaignAck | str) -> tuple[str, str, str]:
    """``(url, launch_request_id, status_url as given)`` for a tracker target.

    A relative ``status_url`` is appended to ``campaign_url`` (which may carry
    a path prefix); an absolute one is accepted only on ``campaign_url``'s
    origin, so the API key never goes to another host. A bare
    ``launch_request_id`` becomes ``/v2/send-campaign/<id>``.
    """
    if isinstance(target, CampaignAck):
        status_url = target.status_url
        launch_request_id: str | None = target.launch_request_id
    elif isinstance(target, str):
        if "/" in target:
            status_url, launch_request_id = target, None
        else:
            problems: list[tuple[str, str]] = []
            segment = path_segment("launch_request_id", target, problems)
            raise_problems(problems)
            return f"{campaign_url}/v2/send-campaign/{segment}", target, target
    else:
        raise errors.ValidationError(
            [
                (
                    "target",
                    "expected a CampaignAck, a launch_request_id or a status_url, "
                    f"got {type(target).__name__}",
                )
            ]
        )
    if not isinstance(status_url, str) or not status_url.strip():
        raise errors.CampaignKitError(f"invalid status_url {status_url!r}")
    if any(ord(char) < 0x21 or char in "\\\x7f" for char in status_url):
        raise errors.CampaignKitError(
            f"refusing status_url {status_url!r}: whitespace, control characters or backslashes"
        )
    parts = urlsplit(status_url)
    if parts.scheme or parts.netloc:
        base = urlsplit(campaign_url)
        if parts.scheme.lower() not in ("http", "https") or parts.username or parts.password:
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: not a plain http(s) URL"
            )
        if _origin(parts) != _origin(base):
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: it is not on the campaign_url's origin "
                f"({base.scheme}://{base.netloc}); the API key is never sent to another host"
            )
        url = status_url
        path = parts.path
    else:
        path = status_url if status_url.startswith("/") else "/" + status_url
        url = campaign_url + path
    url = quote(url, safe=":/?#[]@!$&'()*+,;=%-._~")
    if launch_request_id is None:
        launch_request_id = unquote(path.rstrip("/").rpartition("/")[2])
        if not launch_request_id:
            raise errors.CampaignKitError(f"status_url {status_url!r} names no launch request")
    return url, launch_request_id, status_url


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise errors.CampaignKitError(f"invalid port in {parts.geturl()!r}") from None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port
