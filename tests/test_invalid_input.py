"""A row ``users_from_csv`` could not read (:class:`campaignkit.InvalidInput`)
handed to any call that takes users is refused before anything is sent,
naming its place and the row's own reason and line, never "must be a User"."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import campaignkit
from campaignkit import InvalidInput, User, ValidationError, users_from_csv
from campaignkit.ledger import MemoryLedger
from campaignkit.sandbox import Sandbox
from campaignkit.sync import CampaignClient as SyncClient

pytestmark = pytest.mark.timeout(30)

# Line 3 is too short for Colombia, line 4 has a field too many.
CSV = "country_code,cellphone,name\n57,3001234567,Ana\n57,300,Bea\n57,3001234568,Cy,extra\n"


@pytest.fixture
def items(tmp_path: Path) -> list[User | InvalidInput]:
    path = tmp_path / "users.csv"
    path.write_text(CSV)
    return list(users_from_csv(path))


def _reasons(items: list[User | InvalidInput]) -> list[tuple[str, str]]:
    """The problems a call must report: each unread row at its index, by its reason."""
    return [
        (f"users[{i}]", item.reason)
        for i, item in enumerate(items)
        if isinstance(item, InvalidInput)
    ]


def test_an_unread_row_carries_its_line_and_why(items: list[User | InvalidInput]) -> None:
    assert isinstance(items[0], User)
    short, long = items[1:]
    assert isinstance(short, InvalidInput)
    assert short.row == 3
    assert short.reason.startswith("line 3: cellphone: ")
    assert long == InvalidInput(reason="line 4: expected 3 fields, got 4", row=4)
    assert campaignkit.InvalidInput is InvalidInput


async def _sends(sb: Sandbox) -> int:
    counts: dict[str, int] = (await sb.admin("GET", "/faults"))["requests"]
    return sum(counts.values())


@pytest.mark.parametrize("call", ["send_campaign", "deploy_legacy"])
async def test_a_call_names_the_rows_reason_and_sends_nothing(
    sb: Sandbox, items: list[User | InvalidInput], call: str
) -> None:
    before = await _sends(sb)
    async with sb.client() as client:
        with pytest.raises(ValidationError) as caught:
            await getattr(client, call)("1", items)
    assert list(caught.value.problems) == _reasons(items)
    assert "must be a User" not in str(caught.value)
    assert "users[1]: line 3: cellphone: " in str(caught.value)
    assert await _sends(sb) == before


async def test_the_blocking_client_names_it_too(
    sb: Sandbox, items: list[User | InvalidInput]
) -> None:
    def send() -> ValidationError:
        with (
            SyncClient(sb.api_key, base_url=sb.base_url) as client,
            pytest.raises(ValidationError) as caught,
        ):
            client.send_campaign("1", items)  # type: ignore[arg-type]
        return caught.value

    caught: list[ValidationError] = []
    thread = threading.Thread(target=lambda: caught.append(send()))
    thread.start()
    thread.join(20)
    assert list(caught[0].problems) == _reasons(items)


async def test_other_items_are_still_refused_as_not_users() -> None:
    async with Sandbox() as sb, sb.client() as client:
        with pytest.raises(ValidationError) as caught:
            await client.send_campaign("1", [{"cellphone": "3001234567"}])  # type: ignore[list-item]
    assert list(caught.value.problems) == [("users[0]", "must be a User, but a dict was given")]


async def test_the_suppression_list_names_the_rows_reason(
    items: list[User | InvalidInput],
) -> None:
    async with MemoryLedger() as ledger:
        for change in (ledger.suppress, ledger.unsuppress, ledger.suppressed):
            with pytest.raises(ValidationError) as caught:
                await change(items)
            assert list(caught.value.problems) == [
                (path.replace("users", "phones"), reason) for path, reason in _reasons(items)
            ]
        assert [s async for s in ledger.suppressions()] == []
