"""Every example runs against its own in-process sandbox, as a subprocess."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import orjson
from helpers.processes import Finished, run_process

from campaignkit import DeploymentStatus

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


async def run_example(name: str, *args: str, timeout: float = 90) -> Finished:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
    return await run_process(sys.executable, str(EXAMPLES / name), *args, env=env, timeout=timeout)


async def test_send_and_track() -> None:
    code, out, err = await run_example("send_and_track.py")
    assert code == 0, err
    assert "queued: launch_request_id=" in out
    assert "-> DELIVERED" in out
    assert "FAILURE: 1" in out  # 3001239914 ends 9914: FAILURE after 3 retries
    assert "INVALID_PHONE: 1" in out
    assert "PUSH_NOTIFICATION: 1" in out
    assert "settled (100% of recipients): " in out  # tracker.progress, in words


async def test_bulk_from_csv(tmp_path: Path) -> None:
    code, out, err = await run_example("bulk_from_csv.py")
    assert code == 0, err
    assert "'accepted': 2000" in out
    assert "'invalid': 1" in out
    source = tmp_path / "u.csv"
    source.write_text("country_code,cellphone,name\n+57,3000000001,A\n+57,3000000002,B\n")
    journal = tmp_path / "j.sqlite"
    code, out, err = await run_example("bulk_from_csv.py", str(source), str(journal))
    assert code == 0, err
    assert "'accepted': 2" in out
    assert journal.exists()


async def test_webhook_server() -> None:
    code, out, err = await run_example("webhook_server.py")
    assert code == 0, err
    # The flow asked for an id number; the server answered within the deadline
    # and the sandbox merged its variable into the session.
    assert "webhook: session sr-" in out
    assert "answered the id question: valid=True" in out
    assert "session variables: {'server_user_valid': 'yes'}" in out
    # In the 200 answer (merged by the sandbox), not by a later update_session.
    merged = r"webhook call: 200 in ([\d.]+) s, merged \{'server_user_valid': 'yes'\}"
    [seconds] = re.findall(merged, out)
    assert float(seconds) < 10
    assert "'(variables set: server_user_valid)'" in out
    assert "1.020.304.050" in out
    assert out.count("assign -> 200 {'agent_id':") == 2


async def test_export_sessions(tmp_path: Path) -> None:
    target = tmp_path / "sessions.jsonl"
    code, _out, err = await run_example("export_sessions.py", str(target))
    assert code == 0, err
    lines = target.read_bytes().splitlines()
    assert len(lines) >= 3000
    assert f"exported {len(lines)} sessions" in err
    first = orjson.loads(lines[0])
    assert {"id", "created_at", "cellphone", "country_code"} <= set(first)


async def test_progress_bot() -> None:
    code, out, err = await run_example("progress_bot.py")
    assert code == 0, err
    assert "bot> Campaign queued for 300 users" in out
    # 270 ordinary numbers and 30 magic ones ending 9903..9929, 9903..9905: two
    # DELIVERED and two PUSH_NOTIFICATION are delivered too, two stay SUCCESS,
    # counted as sent (the last line drops nobody).
    assert "300/300 settled (100% of recipients): 2 sent, 274 delivered, 24 failed" in out
    assert f"FAILURE x1: {DeploymentStatus.FAILURE.description}" in out


async def test_progress_bot_gives_up_after_its_timeout_and_says_so() -> None:
    code, out, err = await run_example("progress_bot.py", "--users", "20", "--timeout", "0.3")
    assert code == 0, err
    assert "bot> Stopped following after 0.3 s: " in out
    assert "DONE" not in out  # the request's state is told in words
