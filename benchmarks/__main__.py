"""Run every benchmark: ``python -m benchmarks [--quick] [names...]``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import platform
import sys

import attrs

from ._harness import Row

HERE = pathlib.Path(__file__).parent


def discover() -> list[str]:
    return sorted(path.stem for path in HERE.glob("bench_*.py"))


def run(names: list[str], quick: bool) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"# {name}", file=sys.stderr, flush=True)
        rows.extend(module.run(quick))
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| benchmark | SDK median (min-max) | floor median (min-max) | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:

        def span(t: object) -> str:
            if t is None:
                return "-"
            return f"{t.median * 1e3:.1f} ms ({t.minimum * 1e3:.1f}-{t.maximum * 1e3:.1f})"  # type: ignore[attr-defined]

        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        sign = "<=" if row.better == "lower" else ">="
        target = "-" if row.target is None else f"{sign} {row.target:g}x"
        met = {None: "-", True: "yes", False: "NO"}[row.met]
        notes = f" {row.notes}" if row.notes else ""
        cells = [f"{row.name}{notes}", span(row.sdk), span(row.floor), ratio, target, met]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes, for the test suite")
    parser.add_argument("names", nargs="*", help="benchmark modules (default: all)")
    args = parser.parse_args()
    rows = run(args.names or discover(), args.quick)
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {python}")
    print(table(rows))
    if not args.quick:
        (HERE / "results.json").write_text(
            json.dumps([attrs.asdict(row) for row in rows], indent=2, default=str)
        )


if __name__ == "__main__":
    main()
