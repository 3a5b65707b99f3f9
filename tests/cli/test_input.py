"""Users files and the one coercion behind them: a user, and its
``deployment_eta`` above all, reads the same from a CSV row, a JSON file and a
dict handed to ``send_bulk``; a date-time without a UTC offset is refused by
each, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import first_poll, run, write_csv

from campaignkit import User
from campaignkit._input.users import as_user
from campaignkit._input.validation import Problems, user_wire
from campaignkit.bulk import InvalidInput, users_from_csv
from campaignkit.cli.context import UsageError
from campaignkit.cli.input import load_users
from campaignkit.sandbox import Sandbox

ROW = {"country_code": "+57", "cellphone": "3000000001"}
IN_2030 = 1893456000  # 2030-01-01T00:00:00Z


def eta_files(tmp_path: Path, eta: Any) -> tuple[Path, Path]:
    """The same user with ``eta`` as a CSV file and as a JSON file."""
    csv_path = write_csv(tmp_path / "u.csv", [{**ROW, "deployment_eta": str(eta)}])
    json_path = tmp_path / "u.json"
    json_path.write_bytes(orjson.dumps([{**ROW, "deployment_eta": eta}]))
    return csv_path, json_path


def wire_eta(user: User) -> Any:
    problems: Problems = []
    wire = user_wire(user, "user", problems)
    assert wire is not None, problems
    return wire["deployment_eta"]


@pytest.mark.parametrize(
    "eta", [IN_2030, str(IN_2030), "2030-01-01T00:00:00Z", "2030-01-01T01:00:00+01:00"]
)
def test_an_eta_in_seconds_or_with_an_offset_reads_the_same_everywhere(
    tmp_path: Path, eta: Any
) -> None:
    csv_path, json_path = eta_files(tmp_path, eta)
    from_dict, reason = as_user({**ROW, "deployment_eta": eta})
    assert from_dict is not None, reason
    from_csv = next(iter(users_from_csv(csv_path)))
    assert isinstance(from_csv, User)
    users = [from_csv, load_users(str(json_path), None)[0], from_dict]
    assert [wire_eta(user) for user in users] == [IN_2030] * 3


@pytest.mark.parametrize("eta", ["2030-01-01T00:00:00", "2030-01-01"])
async def test_a_naive_eta_is_refused_everywhere_naming_the_field(
    sb: Sandbox, tmp_path: Path, eta: str
) -> None:
    poll = await first_poll(sb)
    csv_path, json_path = eta_files(tmp_path, eta)
    [row] = users_from_csv(csv_path)
    assert isinstance(row, InvalidInput)
    assert row.reason == "line 2: deployment_eta: datetime must be timezone-aware"
    # A CSV names its file line, a JSON array the index.
    for path, where in ((csv_path, "u.csv: line 2: "), (json_path, "users[0].")):
        sent = await run(sb, "send", str(poll), str(path))
        assert sent.code == 2, sent.err
        assert f"{where}deployment_eta: datetime must be timezone-aware" in sent.err
    async with sb.client() as client:
        report = await client.send_bulk(poll, [{**ROW, "deployment_eta": eta}])
    assert [i.reason for i in report.invalid] == [
        "users[0].deployment_eta: datetime must be timezone-aware"
    ]
    assert (await sb.snapshot(users=False))["companies"][0]["launches"] in ([], {})


def test_an_eta_that_is_no_date_names_the_field_and_the_text(tmp_path: Path) -> None:
    csv_path, json_path = eta_files(tmp_path, "tomorrow")
    expected = "deployment_eta: expected UNIX seconds or an ISO 8601 date-time, got 'tomorrow'"
    [row] = users_from_csv(csv_path)
    assert isinstance(row, InvalidInput)
    assert row.reason == f"line 2: {expected}"
    assert as_user({**ROW, "deployment_eta": "tomorrow"}) == (None, expected)
    with pytest.raises(UsageError, match=f"users\\[0\\]: {expected}"):
        load_users(str(json_path), None)


async def test_json_users_are_read_as_send_bulk_reads_dicts(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    path = tmp_path / "u.json"
    users = [ROW, {"country_code": "+57", "phone": "3000000002"}, {**ROW, "country_code": "57"}]
    path.write_text("\n".join(orjson.dumps(user).decode() for user in users))  # JSON Lines
    one = await run(sb, "send", str(poll), str(path))
    assert one.code == 2
    assert "line 2: unknown field: phone" in one.err
    bulk = await run(sb, "send", str(poll), str(path), "--bulk")
    assert bulk.code == 6, bulk.err
    assert "invalid: line 2: unknown field: phone" in bulk.err
    # An array's items by their number, named once (not again as users[2]).
    path.write_bytes(orjson.dumps(users))
    array = await run(sb, "send", str(poll), str(path), "--bulk")
    assert array.code == 6, array.err
    assert "invalid: input #2: unknown field: phone" in array.err
    assert "invalid: input #3: country_code: must be '+' and 1 to 4 digits" in array.err


def test_a_json_lines_file_of_one_line_is_one_user(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_bytes(orjson.dumps(ROW) + b"\n")
    [user] = load_users(str(path), None)
    assert (user.country_code, user.cellphone) == (ROW["country_code"], ROW["cellphone"])


def test_a_send_of_a_semicolon_file_names_the_file_line(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(
        b"\xef\xbb\xbfsep=;\r\ncountry_code;cellphone\r\n+57;30\r\n+ 57;3000000002\r\n"
    )
    with pytest.raises(UsageError) as info:
        load_users(str(path), None)
    assert str(info.value) == (
        f"{path}: line 3: cellphone: is too short: 2 digits, where numbers of +57 have 8, 10, "
        "11 (without the country code); line 4: country_code: must be '+' and 1 to 4 "
        "digits, but a str ('+ 57') was given (did you mean '+57'?)"
    )


def test_a_header_without_the_columns_gives_no_hint_the_command_cannot_follow(
    tmp_path: Path,
) -> None:
    # The command has no delimiter option (nor has the bot): the error names
    # the columns it read and how it split them, and nothing else to do.
    path = tmp_path / "spanish.csv"
    path.write_bytes(b"telefono;pais\r\n3001234567;+57\r\n")
    with pytest.raises(UsageError) as info:
        load_users(str(path), None)
    assert str(info.value) == (
        f"{path}: invalid input: header: needs a 'country_code' and a 'cellphone' column "
        "(read the columns 'telefono', 'pais' split on ';')"
    )


async def test_a_json_lines_file_names_the_file_line(sb: Sandbox, tmp_path: Path) -> None:
    # As CSV rows are: "line 4", not the user's index ("users[1]"), with or
    # without --bulk (a blank line counts, as a text editor counts it).
    poll = await first_poll(sb)
    path = tmp_path / "u.jsonl"
    bad = {**ROW, "cellphone": "3000000002", "country_code": "57"}
    path.write_text(f"{orjson.dumps(ROW).decode()}\n\n\n{orjson.dumps(bad).decode()}\n")
    one = await run(sb, "send", str(poll), str(path))
    assert one.code == 2
    assert f"{path}: line 4: country_code: must be '+' and 1 to 4 digits" in one.err
    bulk = await run(sb, "send", str(poll), str(path), "--bulk")
    assert bulk.code == 6, bulk.err
    assert "invalid: line 4: country_code: must be '+' and 1 to 4 digits" in bulk.err
