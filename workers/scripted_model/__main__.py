"""Run the scripted model server by hand: `python -m weft.workers.scripted_model --script FILE`."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from weft.workers.scripted_model.script import load_script_file
from weft.workers.scripted_model.server import ScriptedModelServer


async def _serve(scripts: dict[str, Any], host: str, port: int) -> None:
    async with ScriptedModelServer(scripts, host=host, port=port) as server:
        print(f"scripted model server: OpenAI {server.openai_base_url}", flush=True)
        print(f"                       Anthropic {server.anthropic_base_url}", flush=True)
        print(f"scripts: {', '.join(sorted(scripts)) or '(none; PUT /_scripts/NAME)'}", flush=True)
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m weft.workers.scripted_model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--script",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML/JSON file mapping script names to scripts (repeatable)",
    )
    args = parser.parse_args(argv)
    scripts: dict[str, Any] = {}
    for path in args.script:
        scripts.update(load_script_file(path))
    try:
        asyncio.run(_serve(scripts, args.host, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
