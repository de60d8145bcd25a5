"""The benchmark scenario, shared by bench_floor.py and bench_load_compare.py.

The model calls the `add` tool K times, then answers. Both sides (the hand-written floor
of bench/floor.py and an AgentThread) play the same script, `SCRIPT`, on the same scripted
OpenAI-compatible server, with the same system prompt and tool schema in every request.
weft reads the agent from bench/definitions (the same directory a `weft worker`
subprocess loads); the floor takes the prompt and the tool from those definitions too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from weft.definitions import Definitions, FunctionTool, load_directory
from weft.workers.config import WorkerConfig

DEFINITIONS = Path(__file__).resolve().parent / "definitions"
# The name the definitions' model plays (bench/definitions/models/add_model.yaml).
SCRIPT = "bench_add"
AGENT = "adder"
PROMPT = "adder_prompt"
USER_TEXT = "Add the numbers with the add tool."


# `--eager` of both benches: weft's eager activity dispatch (docs/recovery.md).
EAGER: dict[str, dict[str, Any]] = {
    "gated": {"eager_activities": True},  # the default: while the worker keeps up
    "off": {"eager_activities": False},
    "always": {
        "eager_activities": True,
        "eager_max_start_delay_share": None,
        "eager_max_loop_lag_ms": None,
    },
}


def add_quick_tools_flag(parser: argparse.ArgumentParser) -> None:
    """The benches' `--quick-tools` flag."""
    parser.add_argument(
        "--quick-tools",
        action="store_true",
        help="define weft's add tool quick: its calls run as local activities "
        "(the floor keeps its activity); set before the definitions load",
    )


def use_quick_tools(quick: bool) -> None:
    """Make weft's add tool quick (or not) for this process and the workers it starts
    (bench/definitions/tools/add.py reads the variable when it loads), and say which."""
    os.environ["WEFT_BENCH_QUICK_TOOLS"] = "1" if quick else "0"
    print(f"weft's add tool: {'quick (local activities)' if quick else 'an activity'}")


def eager_worker(choice: str) -> WorkerConfig:
    """weft's worker settings for an `--eager` choice."""
    return WorkerConfig(**EAGER[choice])


def add_eager_flag(parser: argparse.ArgumentParser) -> None:
    """The benches' `--eager` flag."""
    parser.add_argument(
        "--eager",
        choices=sorted(EAGER),
        default="gated",
        help="weft's eager activity dispatch: gated (the default: while the worker keeps "
        "up), off, or always (docs/recovery.md)",
    )


def add_script(calls: int) -> dict[str, Any]:
    """`calls` replies calling add once each, then a text answer: `calls + 1` steps."""
    return {
        "replies": [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}], "repeat": calls},
            {"text": "The sums are done."},
        ]
    }


def bench_definitions() -> Definitions:
    """The adder agent, its prompt, the scripted model and the add tool."""
    definitions = load_directory(DEFINITIONS)
    definitions.validate(providers=["scripted"])
    return definitions


def add_tool(definitions: Definitions) -> FunctionTool:
    """The add tool as weft loads it (its args model, its function)."""
    tool = definitions.tools["add"]
    assert isinstance(tool, FunctionTool)
    return tool


def floor_input(definitions: Definitions) -> dict[str, Any]:
    """The floor workflow's input: the request weft would send for the first step."""
    prompt = definitions.prompts[PROMPT]
    return {
        "model": SCRIPT,
        "messages": [
            {"role": "system", "content": prompt.prompt},
            {"role": "user", "content": USER_TEXT},
        ],
        "tools": [
            add_tool(definitions).spec().model_dump(include={"name", "description", "parameters"})
        ],
    }
