"""``campaignkit send --bulk --journal DSN --run``, ``campaignkit runs``, against
an in-process sandbox and a real PostgreSQL ledger."""

from __future__ import annotations

import argparse
import csv
import io
import logging
import os
import re
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import run

from campaignkit import DeploymentStatus
from campaignkit.cli.context import Ctx
from campaignkit.cli.worker import _worker_logging
from campaignkit.errors import LedgerError
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import STATUSES

pytestmark = pytest.mark.timeout(60)


def users_csv(path: Path, count: int) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["country_code", "cellphone", "name"])
        writer.writerows(("+52", f"55{i:08d}", f"user {i}") for i in range(count))
    return path


def phones_csv(path: Path, phones: list[str]) -> Path:
    """A users file of these Mexican cellphones, each named after itself."""
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(
            [("country_code", "cellphone", "name")] + [("+52", p, p) for p in phones]
        )
    return path


async def poll_of(sb: Sandbox) -> str:
    async with sb.client() as client:
        return str((await client.list_polls())[0].id)


async def test_export_rejected_then_retry_them(
    sb: Sandbox, postgres_dsn: str, tmp_path: Path
) -> None:
    poll = await poll_of(sb)
    users = users_csv(tmp_path / "users.csv", 100)
    ledger = ("--journal", postgres_dsn, "--json")
    # The first two chunks' requests are refused with 429 and not retried: rejected.
    await sb.set_faults({"kind": "429", "route": "send_campaign", "count": 2, "retry_after": 0})
    bulk = ("--bulk", "--chunk-size", "20", "--max-retries", "0", "--run", "spring")
    first = await run(sb, "send", poll, str(users), *bulk, *ledger)
    assert first.code == 6, first.err
    assert first.json()["counts"]["rejected"] == 40

    listed = await run(None, "runs", *ledger)
    assert [(r["run"], r["poll_id"]) for r in listed.json()] == [("spring", poll)]
    shown = (await run(None, "runs", "spring", *ledger)).json()
    assert shown["counts"]["accepted"] == 60
    assert shown["counts"]["rejected"] == 40

    export = tmp_path / "rejected.csv"
    exported = await run(
        None, "runs", "spring", "--journal", postgres_dsn, "--export", "rejected", "-o", str(export)
    )
    assert exported.code == 0, exported.err
    assert "wrote 40 rejected users of run spring" in exported.err
    with export.open() as f:
        rows = list(csv.DictReader(f))
    phones = [row["cellphone"] for row in rows]
    assert len(set(phones)) == 40
    assert phones == sorted(phones)  # input order
    assert all(row["name"] == f"user {int(row['cellphone'][2:])}" for row in rows)

    # Without --retry-rejected the run keeps them rejected; with it they go.
    again = await run(sb, "send", poll, str(export), *bulk, *ledger)
    assert again.json()["counts"]["rejected"] == 40
    retried = await run(sb, "send", poll, str(export), *bulk, "--retry-rejected", *ledger)
    assert retried.code == 0, retried.err
    # The run's report, read from its ledger: the 60 of the first send and these 40.
    assert retried.json()["counts"]["accepted"] == 100
    counts = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert len(counts) == 100
    assert set(counts.values()) == {1}
    table = await run(None, "runs", "spring", "--journal", postgres_dsn)
    assert re.search(r"^accepted +100$", table.out, re.MULTILINE), table.out


async def test_a_run_ended_by_a_fatal_answer_says_so(sb: Sandbox, tmp_path: Path) -> None:
    users = users_csv(tmp_path / "users.csv", 10)
    journal = ("--journal", str(tmp_path / "runs.db"))
    sent = await run(sb, "send", "999999", str(users), "--bulk", "--run", "gone", *journal)
    assert sent.code != 0
    shown = (await run(None, "runs", "gone", *journal, "--json")).json()
    assert shown["stopped"].startswith("NotFoundError: POST ")
    assert shown["stopped"].endswith("-> 404: Poll 999999 not found.")
    assert shown["counts"]["rejected"] == 10
    table = await run(None, "runs", "gone", *journal)
    assert f"ended by a fatal answer: {shown['stopped']}" in table.out.splitlines()


async def test_export_ambiguous_to_stdout(sb: Sandbox, tmp_path: Path) -> None:
    poll = await poll_of(sb)
    journal = str(tmp_path / "run.db")
    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1, "when": "after"})
    users = users_csv(tmp_path / "users.csv", 30)
    sent = await run(
        sb, "send", poll, str(users), "--bulk", "--chunk-size", "10", "--journal", journal
    )
    assert sent.code == 4, sent.err
    exported = await run(
        None, "runs", f"poll-{poll}", "--journal", journal, "--export", "ambiguous"
    )
    rows = list(csv.DictReader(exported.out.splitlines()))
    assert len(rows) == 10
    assert "may have been received" in exported.err


async def test_runs_refuses_a_ledger_file_that_does_not_exist(tmp_path: Path) -> None:
    """A mistyped --journal is said to be missing (exit 7), not created empty
    and reported as a ledger without runs."""
    typo = tmp_path / "typo.db"
    for argv in (["runs"], ["runs", "spring"], ["runs", "spring", "--export", "rejected"]):
        result = await run(None, *argv, "--journal", str(typo))
        assert result.code == 7, result.err
        assert f"no ledger at '{typo}': the file does not exist" in result.err
        assert "no runs" not in result.out + result.err
    assert not typo.exists()
    assert not os.listdir(tmp_path)  # nor its -wal or -shm


async def test_runs_usage_errors(tmp_path: Path) -> None:
    journal = str(tmp_path / "run.db")
    async with SqliteLedger(journal):
        pass  # an existing, empty ledger
    assert (await run(None, "runs", "--journal", journal, "--export", "rejected")).code == 2
    missing = await run(None, "runs", "nope", "--journal", journal)
    assert missing.code == 2
    assert "no run named 'nope'" in missing.err
    send = ("send", "1", str(users_csv(tmp_path / "users.csv", 1)), "--api-key", "k" * 8)
    assert (await run(None, *send, "--run", "x")).code == 2
    no_journal = await run(None, *send, "--bulk", "--retry-rejected")
    assert no_journal.code == 2
    assert "need --journal" in no_journal.err


async def test_worker_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without taskiq, ``worker`` says which extra to install (not only
    "No module named 'taskiq'") and exits as a configuration error."""
    monkeypatch.setitem(sys.modules, "taskiq", None)  # what `import taskiq` finds uninstalled
    monkeypatch.delitem(sys.modules, "campaignkit.workers", raising=False)
    argv = ("worker", "--broker", "redis://127.0.0.1:1", "--journal", "x.db", "--api-key", "k" * 8)
    result = await run(None, *argv)
    assert result.code == 3, result.err
    assert "pip install 'campaignkit[workers]'" in result.err
    assert "import of taskiq" in result.err  # what was missing, too


@pytest.mark.parametrize(("quiet", "debug"), [(False, False), (False, True), (True, False)])
def test_worker_lines_on_stderr(quiet: bool, debug: bool) -> None:
    """What ``campaignkit worker`` prints: a line per chunk at its default
    level (warnings only with --quiet), a failed chunk's traceback only with
    --debug, and not taskiq's copy of it; nothing left behind afterwards."""
    err = io.StringIO()
    ctx = Ctx(argparse.Namespace(quiet=quiet, debug=debug, json=False), io.StringIO(), err)
    workers = logging.getLogger("campaignkit.workers")
    with _worker_logging(ctx):
        workers.info("run r chunk c: 5 accepted in 0.10 s")
        try:
            raise LedgerError("the ledger failed")
        except LedgerError:
            workers.error("run r chunk d: failed after 0.20 s", exc_info=True)
            logging.getLogger("taskiq.receiver.receiver").exception(
                "Exception found while executing function."
            )
        # A chunk of another ledger given back to the queue: our WARNING says it.
        workers.warning("run r chunk e: ... not claimed: left on the queue")
        logging.getLogger("taskiq.receiver.receiver").warning(
            "Task %s with id %s skipped setting result.", "campaignkit.send_chunk", "abc"
        )
    text = err.getvalue()
    assert ("run r chunk c: 5 accepted in 0.10 s" in text) is not quiet
    assert "run r chunk d: failed after 0.20 s" in text
    assert ("Traceback" in text) is debug
    assert "Exception found while executing function" not in text
    assert "run r chunk e: ... not claimed: left on the queue" in text
    assert "skipped setting result" not in text
    workers.error("after the worker")
    assert "after the worker" not in err.getvalue()


async def test_follow_shows_the_funnel_and_exports_a_follow_up_run(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await poll_of(sb)
    journal = str(tmp_path / "run.db")
    # 5599..28: FAILURE_BY_UNABLE_TO_CONTACT, ..20: FAILURE_BY_OPTOUT_CONTACT.
    phones = ["5510000001", "5510000002", "5510009928", "5510019928", "5510009920"]
    users = phones_csv(tmp_path / "users.csv", phones)
    sent = await run(
        sb,
        "send",
        poll,
        str(users),
        "--bulk",
        "--chunk-size",
        "2",
        "--journal",
        journal,
        "--run",
        "spring",
    )
    assert sent.code == 0, sent.err
    await sb.set_clock(advance=600)  # every deployment final
    followed = await run(sb, "runs", "spring", "--journal", journal, "--follow", "--json")
    assert followed.code == 0, followed.err
    funnel = followed.json()["funnel"]
    assert (funnel["planned"], funnel["accepted"], funnel["delivered"]) == (5, 5, 2)
    assert funnel["failed"] == {"FAILURE_BY_UNABLE_TO_CONTACT": 2, "FAILURE_BY_OPTOUT_CONTACT": 1}
    shown = await run(None, "runs", "spring", "--journal", journal)
    assert re.search(r"^delivered +2$", shown.out, re.MULTILINE), shown.out
    listed = (await run(None, "runs", "--journal", journal, "--json")).json()
    assert [r["funnel"]["delivered"] for r in listed] == [2]
    # The failure in words, as the status table and the dashboard say it.
    unable = "the network could not reach the device (often temporary)"
    assert re.search(
        rf"^failed: FAILURE_BY_UNABLE_TO_CONTACT +2 +{re.escape(unable)}$", shown.out, re.M
    )

    export = tmp_path / "again.csv"
    exported = await run(
        None,
        "runs",
        "spring",
        "--journal",
        journal,
        "--export-status",
        "failure_by_unable_to_contact",
        "-o",
        str(export),
    )
    assert exported.code == 0, exported.err
    assert "wrote 2 FAILURE_BY_UNABLE_TO_CONTACT users of run spring" in exported.err
    with export.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["cellphone"], r["name"]) for r in rows] == [
        ("5510009928", "5510009928"),
        ("5510019928", "5510019928"),
    ]
    again = await run(
        sb, "send", poll, str(export), "--bulk", "--journal", journal, "--run", "spring-2", "--json"
    )
    assert again.json()["counts"]["accepted"] == 2
    counts = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert {p: n for p, n in counts.items() if n > 1} == {"+525510009928": 2, "+525510019928": 2}


async def test_export_status_needs_failure_statuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = str(tmp_path / "x.db")
    bad = await run(None, "runs", "r", "--journal", journal, "--export-status", "DELIVERED")
    assert bad.code == 2
    assert "'DELIVERED' is not a failure status" in capsys.readouterr().err
    assert (await run(None, "runs", "--journal", journal, "--follow")).code == 2


async def test_send_bulk_follow_reports_the_funnel(sb: Sandbox, tmp_path: Path) -> None:
    poll = await poll_of(sb)
    users = phones_csv(tmp_path / "users.csv", ["5510000001", "5510009928"])
    sent = await run(sb, "send", poll, str(users), "--bulk", "--follow", "--json")
    assert sent.code == 0, sent.err
    funnel = sent.json()["funnel"]
    assert (funnel["planned"], funnel["accepted"]) == (2, 2)
    assert funnel["failed"] == {"FAILURE_BY_UNABLE_TO_CONTACT": 1}
    shown = await run(sb, "send", poll, str(users), "--bulk", "--follow", "--run", "x")
    assert shown.code == 2  # --run needs --journal
    table = await run(sb, "send", poll, str(users), "--bulk", "--follow")
    assert re.search(
        r"^failed: FAILURE_BY_UNABLE_TO_CONTACT +1 +the network could not", table.out, re.M
    )
    single = await run(sb, "send", poll, str(users), "--follow")
    assert single.code == 2
    assert "--follow needs --bulk" in single.err


async def test_follow_timeout_stops_following_and_following_again_resumes(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await poll_of(sb)
    journal = str(tmp_path / "run.db")
    stuck = f"55100099{STATUSES.index(DeploymentStatus.RECEIVED):02d}"  # never settles
    users = phones_csv(tmp_path / "users.csv", ["5510000001", stuck])
    started = time.monotonic()
    sent = await run(
        sb,
        "send",
        poll,
        str(users),
        "--bulk",
        "--chunk-size",
        "1",
        "--journal",
        journal,
        "--run",
        "spring",
        "--follow",
        "--follow-timeout",
        "1",
        "--json",
    )
    assert sent.code == 0, sent.err
    assert time.monotonic() - started < 10
    assert sent.json()["funnel"]["accepted"] == 2
    await sb.set_clock(advance=600)  # the other deployment final
    followed = await run(
        sb, "runs", "spring", "--journal", journal, "--follow", "--follow-timeout", "2", "--json"
    )
    assert followed.code == 0, followed.err
    assert followed.json()["funnel"]["delivered"] == 1
    async with SqliteLedger(journal) as ledger:
        assert len(await ledger.final_launches("spring")) == 1
        outcomes = {o.phone: o.status for o in await ledger.outcomes("spring")}
    assert outcomes["+52" + stuck] is DeploymentStatus.RECEIVED
    for argv in (
        ("runs", "spring", "--journal", journal, "--follow-timeout", "1"),
        ("send", poll, str(users), "--bulk", "--follow-timeout", "1"),
        ("send", poll, str(users), "--follow", "--follow-timeout", "1"),
        ("runs", "spring", "--journal", journal, "--follow", "--follow-timeout", "0"),
    ):
        assert (await run(sb, *argv)).code == 2, argv


async def test_following_tells_who_is_not_confirmed_delivered_yet(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await poll_of(sb)
    journal = str(tmp_path / "run.db")
    # ..03: SUCCESS, delivery never confirmed; ..28: FAILURE_BY_UNABLE_TO_CONTACT.
    users = phones_csv(tmp_path / "users.csv", ["5510009903", "5510019903", "5510009928"])
    argv = ["send", poll, str(users), "--bulk", "--journal", journal, "--run", "later"]
    sent = await run(sb, *argv, "--follow")
    assert sent.code == 0, sent.err
    note = "2 accepted recipients not confirmed delivered yet (sent, or on their way); later, "
    assert note in sent.err
    assert f" runs later --journal {journal} --follow --base-url " in sent.err
    followed = await run(sb, "runs", "later", "--journal", journal, "--follow")
    assert note in followed.err
    shown = await run(sb, "runs", "later", "--journal", journal)  # not following: no note
    assert "not confirmed" not in shown.err
