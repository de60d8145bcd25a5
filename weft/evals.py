"""`weft.evals.run_suite`: run an eval suite against definitions under test, on a worker of
its own (its own task queue, replayed tools served from recordings); docs/evals.md.

```python
report = await weft.evals.run_suite(client, "evals/", "definitions/", store="sqlite:///weft.db")
print(report.pass_rate, [c.name for c in report.cases if not c.passed])
```
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from temporalio.client import Client

from weft._config import ProviderSpec, worker_config
from weft.activities.tool_replay import ToolReplays
from weft.client.evals.cases import SuiteError, check_against, load_suite, suite_digest
from weft.client.evals.grading import ThreadGrader, with_graders
from weft.client.evals.queue import EvalQueueError, require_own_queue
from weft.client.evals.report import junit_xml, render_table, report_json
from weft.client.evals.runner import EvalRunner, RunOptions
from weft.client.threads import Threads
from weft.contract.evals import CaseResult, EvalCase, EvalReport, ToolMode
from weft.definitions import Definitions, load_directory
from weft.store import Store
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

__all__ = [
    "CaseResult",
    "EvalQueueError",
    "EvalReport",
    "SuiteError",
    "junit_xml",
    "render_table",
    "report_json",
    "results_folder",
    "run_suite",
]


def results_folder(config: WeftConfig, digest: str) -> Path:
    """The default results folder of a suite+definitions digest: `.weft/evals/<digest>/`."""
    return config.path(f".weft/evals/{digest}")


def _rubric_models(cases: list[EvalCase]) -> set[str]:
    expects = [c.expect for c in cases] + [t.expect for c in cases for t in c.turns if t.expect]
    return {e.rubric.model for e in expects if e is not None and e.rubric is not None}


def _digest_of(cases: list[EvalCase], definitions: Definitions, tools: ToolMode | None) -> str:
    ids = sorted(definitions.snapshot(name).snapshot_id for name in definitions.agents)
    return suite_digest(cases, ids, tools)


def _parents_in(store: Store) -> Callable[[str], str | None]:
    """A thread's parent thread id, as its store row (written before its first step) says."""

    def parent_of(thread_id: str) -> str | None:
        row = store.threads.get(thread_id)
        return row.parent_thread_id if row is not None else None

    return parent_of


async def run_suite(
    client: Client,
    suite: str | os.PathLike[str],
    definitions: Definitions | str | os.PathLike[str],
    *,
    store: str | None = None,
    providers: Mapping[str, ProviderSpec] | None = None,
    config: WeftConfig | str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    concurrency: int = 4,
    tools: ToolMode | None = None,
    results: str | os.PathLike[str] | None = None,
    task_queue: str | None = None,
    min_pass_rate: float | None = None,
    turn_timeout: float = 300.0,
    scripted: ScriptedModelServer | None = None,
    on_case: Callable[[CaseResult, int, int], None] | None = None,
) -> EvalReport:
    """Run every case of the folder `suite` as a thread of `definitions` and check it.

    A worker of its own runs the cases (a fresh task queue), on the store and providers
    of `config` / `store` / `providers` as `weft.Worker` takes them; recorded cases are
    read from that store. Cases whose result under the same suite+definitions digest is in
    `results` (default `.weft/evals/<digest>/` under the root) are not run again.
    `tools` overrides recorded cases' tool mode (`replayed` by default). `task_queue` names
    the worker's queue (default: a fresh one); no other worker may poll it, since replayed
    tools are served from this worker's memory: the suite is refused (`EvalQueueError`)
    when one does.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    if min_pass_rate is not None and not 0 <= min_pass_rate <= 1:
        raise ValueError(f"min_pass_rate must be between 0 and 1, not {min_pass_rate}")
    built = worker_config(
        config=config, store=store, providers=providers, task_queue=None, keys=None, root=root
    )
    cases = await asyncio.to_thread(load_suite, Path(suite))
    if not isinstance(definitions, Definitions):
        definitions = await asyncio.to_thread(load_directory, built.path(str(definitions)))
    check_against(cases, definitions)
    digest = _digest_of(cases, definitions, tools)
    with_graders(definitions, _rubric_models(cases))
    replays = ToolReplays()
    queue = task_queue or f"weft-eval-{digest[:8]}-{uuid.uuid4().hex[:6]}"
    async with AgentWorker(
        client,
        built,
        definitions=definitions,
        task_queue=queue,
        scripted=scripted,
        tool_replays=replays,
    ) as worker:
        opened, running = worker.store, worker.worker
        if opened is None or running is None:
            raise RuntimeError("the eval worker did not start")
        # Before any case: a thread or call another worker took would run outside the eval.
        await require_own_queue(client, queue, running.client.identity)
        # Subagents of an eval thread are served from its recording's subagents.
        replays.parents = _parents_in(opened)
        threads = Threads(client, task_queue=queue, store=opened)
        runner = EvalRunner(
            threads,
            opened,
            replays=replays,
            grader=ThreadGrader(threads, timeout=turn_timeout),
            options=RunOptions(
                concurrency=concurrency,
                tools=tools,
                turn_timeout=turn_timeout,
                min_pass_rate=min_pass_rate,
            ),
            on_case=on_case,
        )
        folder = Path(results) if results is not None else results_folder(built, digest)
        return await runner.run(str(suite), cases, digest, folder)
