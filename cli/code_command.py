"""`weft code run FILE [--options OPTIONS.json] [--terminate-after-ms N]`: runCode from a shell.

Prints the result as one JSON object and exits 0 whatever the status; a usage error (missing
file, bad options) exits 2 with a message on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


class UsageError(Exception):
    """The command line cannot be run as given; the message says why."""


def register(subparsers: Any) -> None:
    """Add `code run` to an argparse subparsers object (from the main `weft` CLI)."""
    code = subparsers.add_parser("code", help="run code in the runCode sandbox")
    actions = code.add_subparsers(dest="code_command", required=True)
    run_parser = actions.add_parser("run", help="run a TypeScript/JavaScript module")
    run_parser.add_argument("file", help="the module to run (.ts by default, .js for JavaScript)")
    run_parser.add_argument("--options", help="a JSON file of runCode options")
    run_parser.add_argument(
        "--terminate-after-ms",
        type=float,
        default=None,
        help="call terminate() after this many milliseconds (there is no default deadline)",
    )
    run_parser.set_defaults(handler=run)


def _load(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    path = Path(args.file)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read FILE {args.file!r}: {exc}") from None
    options: dict[str, Any] = {}
    if args.options:
        try:
            options = json.loads(Path(args.options).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --options {args.options!r}: {exc}") from None
        except ValueError as exc:
            raise UsageError(f"--options {args.options!r} is not valid JSON: {exc}") from None
        if not isinstance(options, dict):
            raise UsageError(f"--options {args.options!r} must hold a JSON object")
    options.setdefault("filename", path.name)
    if path.suffix in (".js", ".mjs") and "language" not in options:
        options["language"] = "javascript"
    if args.terminate_after_ms is not None and args.terminate_after_ms < 0:
        raise UsageError("--terminate-after-ms must be >= 0")
    return source, options


async def _execute(source: str, options: dict[str, Any], terminate_after_ms: float | None) -> Any:
    from weft.activities.sandbox import SandboxPool, run_code

    with SandboxPool(size=1, max_workers=1) as pool:
        handle = run_code(source, options, pool=pool)
        if terminate_after_ms is not None:
            asyncio.get_running_loop().call_later(
                terminate_after_ms / 1000,
                handle.terminate,
                f"terminated after {terminate_after_ms:g} ms (--terminate-after-ms)",
            )
        return await handle


def run(args: argparse.Namespace) -> int:
    """Run the `code run` command; returns the process exit status."""
    from weft.activities.sandbox import to_jsonable

    try:
        source, options = _load(args)
    except UsageError as exc:
        print(f"weft code run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = asyncio.run(_execute(source, options, args.terminate_after_ms))
    payload = result.model_dump(mode="json", by_alias=True)
    payload["result"] = to_jsonable(result.result)
    payload["reports"] = to_jsonable(result.reports)
    print(json.dumps(payload, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: `python -m weft.cli.code_command run FILE ...`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["code"]:
        argv.insert(0, "code")  # so `python -m weft.cli.code_command run FILE` works too
    parser = argparse.ArgumentParser(prog="weft")
    register(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return int(exc.code or 0) and EXIT_USAGE
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
