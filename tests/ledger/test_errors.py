"""Errors kept in a ledger as text come back as their class."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaignkit import User
from campaignkit.errors import (
    AmbiguousSendError,
    AuthenticationError,
    BadRequestError,
    CampaignKitError,
    ConnectionError,
    NotFoundError,
    RateLimitError,
    ResponseError,
    ServerError,
    TimeoutError,
)
from campaignkit.ledger._errors import error_detail, error_from_detail

URL = "http://campaign.test/v2/send-campaign/7"
USERS = (User(cellphone="3001234567", country_code="+57"),)


@pytest.mark.parametrize(
    "error",
    [
        NotFoundError(404, "POST", URL, '{"detail":"Poll not found"}', detail="Poll not found"),
        AuthenticationError(401, "POST", URL, "", error="unauthorized", message="bad key"),
        BadRequestError(400, "POST", URL, "", detail="poll id required"),
        RateLimitError(429, "POST", URL, "", detail="slow down"),
        ServerError(502, "POST", URL, "<html>"),
        ConnectionError("connection reset", request_sent=True),
        TimeoutError("no answer in 30 s"),
        ResponseError("not JSON", users=USERS),
        AmbiguousSendError("may have been sent", users=USERS),
        CampaignKitError("something else"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_an_error_comes_back_as_its_class(error: CampaignKitError) -> None:
    rebuilt = error_from_detail(error_detail(error), users=USERS)
    assert type(rebuilt) is type(error)
    assert str(rebuilt) == str(error)
    assert getattr(rebuilt, "status", None) == getattr(error, "status", None)
    if isinstance(error, AmbiguousSendError | ResponseError):
        assert isinstance(rebuilt, AmbiguousSendError | ResponseError)
        assert rebuilt.users == USERS


@given(
    st.sampled_from(["", "NotFoundError: ", "ConnectionError: ", "ValidationError: ", "Nope: "]),
    st.text(max_size=200),
)
def test_any_text_rebuilds_to_an_sdk_error(name: str, text: str) -> None:
    rebuilt = error_from_detail(name + text)
    assert isinstance(rebuilt, CampaignKitError)
