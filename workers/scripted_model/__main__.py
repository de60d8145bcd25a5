"""Run the scripted model server by hand:
`python -m weft.workers.scripted_model --script FILE_OR_FOLDER` (docs/scripted-model.md)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from weft.workers.scripted_model.script import ScriptError, load_script_file
from weft.workers.scripted_model.server import ScriptedModelServer


async def _serve(scripts: dict[str, Any], host: str, port: int) -> None:
    async with ScriptedModelServer(scripts, host=host, port=port) as server:
        print(f"scripted model server: OpenAI {server.openai_base_url}", flush=True)
        print(f"                       Anthropic {server.anthropic_base_url}", flush=True)
        print(f"scripts: {', '.join(sorted(scripts)) or '(none; PUT /_scripts/NAME)'}", flush=True)
        await asyncio.Event().wait()


def load_scripts(paths: list[str]) -> dict[str, Any]:
    """The scripts of each YAML/JSON file, or of every such file in a folder, by name."""
    scripts: dict[str, Any] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif path.is_file():
            files = [path]
        else:
            raise ScriptError(f"--script {given}: no such file or folder")
        for file in files:
            scripts.update(load_script_file(file))
    return scripts


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m weft.workers.scripted_model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--script",
        action="append",
        default=[],
        metavar="FILE_OR_FOLDER",
        help="a YAML/JSON file mapping script names to scripts, or a folder of them (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        scripts = load_scripts(args.script)
        # Validated now, so a bad script is one line at start, not a 400 on first use.
        ScriptedModelServer(scripts)
    except ScriptError as err:
        parser.exit(2, f"{parser.prog}: {err}\n")
    try:
        asyncio.run(_serve(scripts, args.host, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
