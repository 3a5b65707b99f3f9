"""Every benchmark runs at small sizes, so none of them can rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted(path.stem for path in (ROOT / "benchmarks").glob("bench_*.py"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_quick(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if re.match(r"\| \d", line)]
    assert rows, result.stdout
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")]
        ratio, target = cells[4], cells[5]
        # A row states a ratio, or (with no target) only figures in its notes.
        assert re.fullmatch(r"\d+\.\d\dx", ratio) or (ratio == target == "-"), row
