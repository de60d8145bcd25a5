"""Evals: recorded cases replayed against the scripted model, against plain threads.

Run: `.venv/bin/python bench/bench_eval.py [--cases 200] [--turns 5] [--levels 1,10,50]`.
One thread of `turns` turns (each a tool call and an answer) is recorded; the suite has
`cases` recorded cases of it (tools replayed). For each concurrency level it prints the
wall time and cases/s of `weft.evals.run_suite` (a worker of its own, started in the
timing, as `weft eval` does); then the same turns as plain threads (`Threads.ask`, no
eval) at the highest level, and the ratio eval/plain (target ≥ 0.8 at 50).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from temporalio.client import Client

from weft.definitions import Definitions
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import add_script, agent_definitions, local_stack, scratch_config  # noqa: E402

from weft import evals  # noqa: E402
from weft.client.threads import Threads  # noqa: E402
from weft.workers.agent_worker import AgentWorker  # noqa: E402

SCRIPT = {
    "turns": [
        {
            "match": "regex:^turn",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris."},
            ],
        }
    ]
}


async def _plain(
    client: Client,
    scripted: ScriptedModelServer,
    config: WeftConfig,
    definitions: Definitions,
    cases: int,
    turns: int,
    level: int,
) -> float:
    """Seconds to run `cases` threads of `turns` turns, `level` at once, with no eval."""
    began = time.perf_counter()
    async with AgentWorker(
        client,
        config,
        definitions=definitions,
        task_queue=f"plain-{uuid.uuid4().hex[:8]}",
        scripted=scripted,
    ) as worker:
        threads = Threads(client, task_queue=worker.task_queue, store=worker.store)
        gate = asyncio.Semaphore(level)

        async def one() -> None:
            async with gate:
                handle = await threads.start("helper")
                for turn in range(turns):
                    result = await threads.ask(handle.id, f"turn {turn}", timeout=600)
                    assert result.status == "completed", result
                await threads.terminate(handle.id, "done")

        await asyncio.gather(*(one() for _ in range(cases)))
    return time.perf_counter() - began


async def main(cases: int, turns: int, levels: list[int]) -> None:
    async with local_stack() as (client, scripted, _address):
        definitions = agent_definitions(add_script(scripted, SCRIPT))
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            config = scratch_config(tmp)
            async with AgentWorker(
                client,
                config,
                definitions=definitions,
                task_queue=f"rec-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                threads = Threads(client, task_queue=worker.task_queue, store=worker.store)
                handle = await threads.start("helper")
                for turn in range(turns):
                    await threads.ask(handle.id, f"turn {turn}", timeout=600)
                await threads.terminate(handle.id, "recorded")
            suite = tmp / "suite"
            suite.mkdir()
            for index in range(cases):
                (suite / f"case{index:04d}.yaml").write_text(
                    yaml.safe_dump({"recorded": handle.id})
                )
            print(
                f"{cases} recorded cases of {turns} turns (each a replayed tool call and an answer)"
            )
            rates: dict[int, float] = {}
            for level in levels:
                began = time.perf_counter()
                report = await evals.run_suite(
                    client,
                    suite,
                    definitions,
                    config=config,
                    scripted=scripted,
                    concurrency=level,
                    results=tmp / f"results-{level}",
                )
                wall = time.perf_counter() - began
                assert report.passed_count == cases, [c for c in report.cases if not c.passed][:1]
                rates[level] = cases / wall
                print(f"eval  concurrency {level:>3}: {wall:7.2f} s, {rates[level]:6.2f} cases/s")
            top = max(levels)
            wall = await _plain(client, scripted, config, definitions, cases, turns, top)
            plain = cases / wall
            print(f"plain concurrency {top:>3}: {wall:7.2f} s, {plain:6.2f} threads/s")
            print(f"ratio eval/plain at {top}: {rates[top] / plain:.2f}x (target >= 0.8x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--levels", default="1,10,50")
    args = parser.parse_args()
    asyncio.run(main(args.cases, args.turns, [int(x) for x in args.levels.split(",")]))
