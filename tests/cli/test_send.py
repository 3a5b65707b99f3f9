"""``send``, one request or ``--bulk``, against an in-process sandbox."""

from __future__ import annotations

import shlex
from pathlib import Path

import orjson
from helpers.cli import (
    first_poll,
    run,
    users_rows,
    write_csv,
)

from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox


async def test_send_csv_then_status_and_track(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = users_rows(3)
    rows.append({"country_code": "+57", "cellphone": "3110009916", "name": "failing"})
    path = write_csv(tmp_path / "users.csv", rows)
    sent = await run(sb, "send", str(poll), str(path), "--json")
    assert sent.code == 0, sent.err
    ack = sent.json()
    launch = ack["launch_request_id"]
    assert ack["id"] == str(poll)

    tracked = await run(sb, "track", launch, "--settled", "--poll-interval", "0.05", "--json")
    assert tracked.code == 0, tracked.err
    data = tracked.json()
    assert data["status"] == "DONE"
    # Settled: sent (SUCCESS) may not have become DELIVERED yet.
    counts = data["counts"]
    assert counts.pop("FAILURE_BY_RATE_LIMIT") == 1
    assert counts.get("DELIVERED", 0) + counts.get("SUCCESS", 0) == 3
    assert set(counts) <= {"DELIVERED", "SUCCESS"}
    assert "tracking" in tracked.err  # the progress line went to stderr

    status = await run(sb, "status", launch)
    assert status.code == 0, status.err
    assert "DELIVERED" in status.out
    assert "FAILURE_BY_RATE_LIMIT" in status.out
    assert "4 deployments" in status.out
    listed = await run(sb, "status", launch, "--deployments")
    assert "3110009916" in listed.out


async def test_send_json_with_track(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    path = tmp_path / "users.json"
    path.write_bytes(
        orjson.dumps(
            {
                "users": [
                    {
                        "cellphone": "3000000001",
                        "country_code": "+57",
                        "user_session_keys": {"a": "1"},
                    },
                    {
                        "cellphone": "3000009922",
                        "country_code": "+57",
                        "user_session_keys": [{"key": "b", "value": "2"}],
                    },
                ]
            }
        )
    )
    result = await run(sb, "send", str(poll), str(path), "--track", "-q")
    assert result.code == 0, result.err
    assert "launch_request_id:" in result.out
    # The service's message ends with a full stop: not ".:" before the counts.
    assert f"Campaign queued for deployment: 2 users, poll {poll}\n" in result.out
    assert "DONE" in result.out
    assert result.err == ""  # --quiet: no progress, no notes


async def test_send_invalid_user_is_usage_error_naming_the_path(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    path = write_csv(
        tmp_path / "u.csv",
        [
            {"country_code": "+57", "cellphone": "3000000001"},
            {"country_code": "+ 57", "cellphone": "3000000002"},
        ],
    )
    result = await run(sb, "send", str(poll), str(path))
    assert result.code == 2
    # The file's line (the header is line 1), and the fix for a stray space.
    said = (
        "u.csv: line 3: country_code: must be '+' and 1 to 4 digits, but a str ('+ 57') was given"
    )
    assert said in result.err
    assert "(did you mean '+57'?)" in result.err
    assert result.err.count("\n") == 1
    assert (await sb.snapshot(users=False))["companies"][0]["launches"] in ([], {})


async def test_send_missing_file_and_bad_csv_header(sb: Sandbox, tmp_path: Path) -> None:
    missing = await run(sb, "send", "1", str(tmp_path / "nope.csv"))
    assert missing.code == 2
    assert "no such file" in missing.err
    bad = tmp_path / "bad.csv"
    bad.write_text("phone,name\n300,x\n")
    result = await run(sb, "send", "1", str(bad))
    assert result.code == 2
    assert "country_code" in result.err


async def test_send_unknown_poll_is_api_error(sb: Sandbox, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "u.csv", users_rows(1))
    result = await run(sb, "send", "987654", str(path))
    assert result.code == 1
    assert "404" in result.err


async def test_bulk_send_with_journal_resumes(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = users_rows(50)
    rows.append(dict(rows[0]))  # a duplicate phone
    path = write_csv(tmp_path / "users.csv", rows)
    journal = tmp_path / "journal.sqlite"
    argv = ("send", str(poll), str(path), "--bulk", "--chunk-size", "20", "--journal", str(journal))
    first = await run(sb, *argv, "--json")
    assert first.code == 0, first.err
    report = first.json()
    assert report["counts"]["accepted"] == 50
    assert report["counts"]["duplicate"] == 1
    assert len(report["launch_request_ids"]) == 3
    assert "sending" in first.err
    # Its first line says the ledger is new: a resume that says so is on the wrong one.
    assert first.err.startswith(f"campaignkit: new ledger created: SqliteLedger('{journal}')")

    second = await run(sb, *argv, "--json")
    assert second.code == 0, second.err
    assert second.json()["launch_request_ids"] == report["launch_request_ids"]
    assert "new ledger" not in second.err
    launches = (await sb.snapshot(users=False))["companies"][0]["launches"]
    assert len(launches) == 3  # nothing was sent twice


async def test_a_resume_with_a_mistyped_journal_says_first_that_it_is_a_new_ledger(
    sb: Sandbox, tmp_path: Path
) -> None:
    """Before: it sent the whole run again without a word. It still sends
    (a new ledger is how a run starts), and its first line says why, even
    with --quiet."""
    poll = await first_poll(sb)
    path = write_csv(tmp_path / "users.csv", users_rows(5))
    argv = ("send", str(poll), str(path), "--bulk", "--quiet")
    first = await run(sb, *argv, "--journal", str(tmp_path / "run.db"))
    assert first.code == 0, first.err
    typo = tmp_path / "rnu.db"
    resumed = await run(sb, *argv, "--journal", str(typo))
    assert resumed.code == 0, resumed.err
    assert resumed.err.splitlines()[0] == (
        f"campaignkit: new ledger created: SqliteLedger('{typo}') did not exist (ledger "
        f"{await identity_of(typo)}); resuming a run? then this is not its --journal"
    )


async def identity_of(journal: Path) -> str:
    async with SqliteLedger(journal, create=False) as ledger:
        return ledger.identity


async def test_bulk_send_invalid_rows_exit_6(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = [*users_rows(3), {"country_code": "+57", "cellphone": "300 00", "name": "x"}]
    path = write_csv(tmp_path / "users.csv", rows)
    result = await run(sb, "send", str(poll), str(path), "--bulk")
    assert result.code == 6
    assert "accepted" in result.out
    # The line named once, then what is wrong with it.
    assert "invalid: line 5: cellphone: is too short: 5 digits" in result.err


async def test_journal_needs_bulk(sb: Sandbox, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "u.csv", users_rows(1))
    result = await run(sb, "send", "1", str(path), "--journal", str(tmp_path / "j"))
    assert result.code == 2
    assert "--bulk" in result.err


async def test_send_5xx_is_ambiguous_exit_4(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    path = write_csv(tmp_path / "u.csv", users_rows(2))
    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1})
    result = await run(sb, "send", str(poll), str(path))
    assert result.code == 4
    *advice, error = result.err.splitlines()
    assert error.startswith("campaignkit: error: send_campaign may or may not have reached")
    assert advice[0].startswith("these 2 users were not sent again.")
    assert "campaignkit status" not in result.err  # it cannot answer without an ack
    # The commands given are exact, and they work.
    check, resend = (line.strip().split()[1:] for line in advice if line.startswith("  "))
    assert check[:3] == ["sessions", str(poll), "--since"]
    listed = await run(sb, *check)
    assert listed.code == 0, listed.err
    assert listed.out.startswith("id,created_at,finished_at,country_code,cellphone")
    assert resend == ["send", str(poll), str(path)]


async def test_a_rerun_s_ambiguous_users_get_advice_in_good_grammar(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    path = write_csv(tmp_path / "u.csv", users_rows(3))
    journal = str(tmp_path / "sends.db")
    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1})
    first = await run(sb, "send", str(poll), str(path), "--bulk", "--journal", journal)
    assert first.code == 4, first.err
    again = await run(sb, "send", str(poll), str(path), "--bulk", "--journal", journal)
    assert again.code == 4, again.err
    assert "these users were ambiguous in an earlier run" in again.err
    assert "these 3 users were not sent again." in again.err
    export = f"campaignkit runs poll-{poll} --journal {journal} --export ambiguous -o ambiguous.csv"
    assert f"  {export} && campaignkit send {poll} ambiguous.csv" in again.err
    assert "never resends them" in again.err


async def test_every_printed_command_quotes_what_it_interpolates(
    sb: Sandbox, tmp_path: Path
) -> None:
    # A run, ledger or file named with shell syntax: pasted, a printed command
    # ran it. Each command must split back into exactly its arguments.
    folder = tmp_path / "it's $(touch pwned)"
    folder.mkdir()
    poll, run_name = str(await first_poll(sb)), "spring; touch pwned"
    path = write_csv(folder / "u;v.csv", users_rows(3))
    journal = str(folder / "sends `x`.db")
    added = await run(None, "suppress", "add", "--journal", journal, "--create", "+573000000000")
    assert added.code == 0, added.err
    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1})
    bulk = ["send", poll, str(path), "--bulk", "--journal", journal, "--run", run_name]
    sent = await run(sb, *bulk)
    assert sent.code == 4, sent.err
    listed = sent.err.split("on the suppression list (", 1)[1].split("; --ignore")[0]
    assert shlex.split(listed)[1:] == ["suppress", "list", "--journal", journal]
    [resend] = [line for line in sent.err.splitlines() if " --export ambiguous " in line]
    assert shlex.split(resend)[1:] == [
        *("runs", run_name, "--journal", journal, "--export", "ambiguous", "-o", "ambiguous.csv"),
        *("&&", "campaignkit", "send", poll, "ambiguous.csv"),
    ]
    [check] = [line for line in sent.err.splitlines() if line.startswith("  campaignkit sessions")]
    assert shlex.split(check)[1:3] == ["sessions", poll]

    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1})
    single = await run(sb, "send", poll, str(path))
    assert single.code == 4, single.err
    [again] = [line for line in single.err.splitlines() if line.startswith("  campaignkit send")]
    assert shlex.split(again)[1:] == ["send", poll, str(path)]


async def test_a_rerun_says_which_users_an_earlier_send_had_accepted(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    first_rows = users_rows(30)
    path = write_csv(tmp_path / "users.csv", first_rows)
    journal = str(tmp_path / "runs.db")
    argv = ("send", str(poll), str(path), "--bulk", "--chunk-size", "20", "--journal", journal)
    first = await run(sb, *argv, "--run", "spring")
    assert first.code == 0, first.err
    assert "2 campaigns accepted in" in first.out
    assert "earlier send" not in first.out
    write_csv(tmp_path / "users.csv", users_rows(50))  # 20 people added to the list
    again = await run(sb, *argv, "--run", "spring")
    assert again.code == 0, again.err
    assert "(30 users by an earlier send of run spring: not sent again)" in again.out
    received = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert (len(received), set(received.values())) == (50, {1})
