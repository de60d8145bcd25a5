"""`weft eval SUITE_DIR`: run an eval suite against the definitions under test and report.

It uses the configured Temporal (starting the bundled dev server when nothing listens
there, as `weft dev` does) and runs the cases on a worker of its own; docs/evals.md.
Exit codes: 0 when the suite passed, 1 when a case failed or `--min-pass-rate` was
missed, 2 for bad flags or a bad suite.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from temporalio.client import Client

from weft.cli.temporal_client import client_from_config
from weft.client.evals.cases import SuiteError
from weft.client.evals.report import progress_line
from weft.contract.evals import CaseResult
from weft.workers.config import WeftConfig

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(commands: Any) -> None:
    """Add `eval` to the `weft` commands."""
    parser = commands.add_parser(
        "eval",
        help="run an eval suite (a folder of cases) against the definitions (docs/evals.md)",
    )
    parser.add_argument("suite", help="the suite folder: one YAML file per case")
    parser.add_argument("--definitions", help="definitions under test (default: the config's)")
    parser.add_argument("--concurrency", type=int, default=4, help="cases at once (default 4)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML to FILE")
    parser.add_argument(
        "--min-pass-rate",
        type=float,
        metavar="X",
        help="pass when at least this share of cases pass (0..1; default: all must pass)",
    )
    parser.add_argument(
        "--tools",
        choices=["live", "replayed"],
        help="recorded cases' tools (default: replayed, never running a tool body)",
    )
    parser.add_argument(
        "--results", metavar="DIR", help="case results (default .weft/evals/<digest>/)"
    )
    parser.add_argument(
        "--turn-timeout", type=float, default=300.0, help="seconds one turn may take"
    )
    parser.set_defaults(handler=run)


def _usage(message: str) -> int:
    print(f"weft: {message}", file=sys.stderr)
    return EXIT_USAGE


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Run the suite; print the table (or JSON), write JUnit; the exit code says if it passed."""
    from weft import evals
    from weft.workers.demo.defaults import with_demo_defaults

    if args.concurrency < 1:
        return _usage(f"--concurrency must be at least 1, not {args.concurrency}")
    if args.min_pass_rate is not None and not 0 <= args.min_pass_rate <= 1:
        return _usage(f"--min-pass-rate must be between 0 and 1, not {args.min_pass_rate}")
    if not Path(args.suite).is_dir():
        return _usage(f"eval suite {args.suite}: not a folder")
    progress = Progress(sys.stderr)
    # As `weft dev`: without definitions of its own, a fresh folder evaluates the demo's.
    config = with_demo_defaults(config)
    async with _temporal(config) as client:
        try:
            report = await evals.run_suite(
                client,
                args.suite,
                config.definitions,
                config=config,
                concurrency=args.concurrency,
                tools=args.tools,
                results=args.results,
                min_pass_rate=args.min_pass_rate,
                turn_timeout=args.turn_timeout,
                on_case=progress,
            )
        except SuiteError as err:
            return _usage(str(err))
        finally:
            progress.close()
    print(evals.report_json(report) if args.json else evals.render_table(report))
    if args.junit:
        Path(args.junit).write_text(evals.junit_xml(report), encoding="utf-8")
    return 0 if report.ok else EXIT_FAILED


class Progress:
    """Cases as they end, on stderr: a bar redrawn in place on a terminal; in a log (CI,
    a pipe) one plain line per case, since a bar's redraws would be one line each."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._terminal = stream.isatty()
        self._failed = 0
        self._drawn = False

    def __call__(self, result: CaseResult, done: int, total: int) -> None:
        """Show that `result` ended, `done` of `total` cases."""
        self._failed += not result.passed
        if self._terminal:
            line = f"\r{progress_line(done, total, self._failed)}"
        else:
            line = f"{done}/{total} {result.name}: {'pass' if result.passed else 'FAIL'}\n"
        self._stream.write(line)
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the bar's line, so the report starts on a line of its own."""
        if self._terminal and self._drawn:
            self._stream.write("\n")
            self._stream.flush()


@asynccontextmanager
async def _temporal(config: WeftConfig) -> AsyncIterator[Client]:
    """A client of the configured Temporal, started here (and stopped after) when nothing
    listens at its address."""
    from weft.workers.dev_server import DevServer, is_listening

    temporal = config.temporal
    server: DevServer | None = None
    if not is_listening(temporal.address):
        dev = temporal.dev_server.model_copy()
        if dev.db_file:
            dev.db_file = str(config.path(dev.db_file))
        server = DevServer(
            dev,
            address=temporal.address,
            namespace=temporal.namespace,
            ui=False,
            log_file=config.path(".weft/temporal-dev.log"),
        )
        await server.start()
    try:
        yield await client_from_config(config)
    finally:
        if server is not None:
            await server.stop()
