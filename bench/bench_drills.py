"""The fault drills at full size: real workers, real faults, checked invariants.

Run: `.venv/bin/python bench/bench_drills.py [--drill NAME ...] [--threads N]`. Each drill
prints what it measured and PASS/FAIL per invariant; the exit code is 1 when any failed.

  sigkill    two `weft worker` processes on PostgreSQL, one SIGKILLed mid-run (50 threads)
  restart    the dev server (persistent db file) restarted under live threads (20 threads)
  eviction   idle threads evicted from a 5-entry workflow cache, woken by a message (100)
  faults     dropped connections, truncated streams, 500 then 200 from the model (50)
  drain      SIGTERM on a worker with in-flight tools; a second worker finishes (20)
  recovery   seconds until threads inside a tool move again after a worker SIGKILL and a
             dev server SIGKILL, against a 5 s target (10)

The reduced-size versions are tests (tests/test_drills_*.py). PostgreSQL is expected at
127.0.0.1:5432 (WEFT_TEST_POSTGRES_URL overrides); the drill creates and drops its database.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from drills import DRILLS  # noqa: E402
from drills.common import Report  # noqa: E402


async def main(args: argparse.Namespace) -> int:
    """Run the chosen drills one after another; 1 when any invariant failed."""
    reports = []
    for name in args.drill or list(DRILLS):
        print(f"== drill {name}", flush=True)
        report = Report(name)
        began = time.perf_counter()
        try:
            await DRILLS[name](report, args)
        except Exception as error:  # a drill that crashes is a failed drill, not a stopped run
            traceback.print_exc()
            report.check("the drill ran to the end", False, f"{type(error).__name__}: {error}")
        report.figure("drill wall time", f"{time.perf_counter() - began:.0f} s")
        reports.append(report)
    print("== summary")
    for report in reports:
        failed = [label for label, ok, _ in report.checks if not ok]
        verdict = "PASS" if report.ok else f"FAIL ({', '.join(failed) or 'no checks'})"
        print(f"  {report.name}: {verdict}")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drill", action="append", choices=list(DRILLS), help="repeatable")
    parser.add_argument("--threads", type=int, help="threads per drill (default: per drill)")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
