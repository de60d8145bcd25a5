"""`weft thread subagents ID`: a thread's `subagent_job_summary`, read from the store
(docs/read-models.md): one line per child (indented by depth) with whether it can still make
progress, then one line per task with its attempt thread; `--json` prints the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.client.threads import Threads
from weft.contract.subagent_summary import SubagentJobSummary
from weft.store import Store
from weft.workers.config import WeftConfig


def register(actions_parser: Any) -> None:
    """Add `subagents` to the `weft thread` subcommands."""
    parser = actions_parser.add_parser(
        "subagents",
        help="the thread's subagents (recursively), its tasks and whether each child can "
        "still make progress",
        description="The subagent and job summary: every child thread under this one with "
        "its status and recoverability (running, waiting on a person, idle, closed, lost; "
        "whether a retry is possible), and the tasks the thread and its children created, "
        "with their status counts and each task's current attempt thread.",
    )
    parser.add_argument("thread_id")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=run_subagents, closed_ok=True)


async def run_subagents(args: argparse.Namespace, config: WeftConfig) -> int:
    store = Store.open(config.store_url())
    try:
        client = await client_from_config(config)
        threads = Threads(client, task_queue=config.temporal.task_queue, store=store)
        found = await threads.subagent_summary(args.thread_id)
    finally:
        store.close()
    if found is None:
        print(f"weft: thread {args.thread_id!r} is not in the store", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(found.model_dump(mode="json", by_alias=True), indent=2))
    else:
        print(render(found))
    return 0


def render(found: SubagentJobSummary) -> str:
    """A line per child, indented by depth, then the task counts and a line per task."""
    lines = [f"thread {found.thread_id} ({found.thread_status}): {len(found.children)} subagents"]
    for child in found.children:
        health = child.recoverability
        retry = f", retry {health.retry}" if health.retry else ""
        lines.append(
            f"{'  ' * child.depth}{child.thread_id} {child.name!r} ({child.agent}) "
            f"{child.status}: {health.state}{retry} ({health.reason})"
        )
    counts = ", ".join(f"{n} {status}" for status, n in found.tasks.counts.items())
    lines.append(f"tasks: {found.tasks.total}" + (f" ({counts})" if counts else ""))
    for task in found.tasks.items:
        where = f" in {task.assigned_thread_id}" if task.assigned_thread_id else ""
        lines.append(f"  {task.task_id} {task.status} ({task.assignee}){where}")
    job_counts = ", ".join(f"{n} {status}" for status, n in found.jobs.counts.items())
    lines.append(f"jobs: {found.jobs.total}" + (f" ({job_counts})" if job_counts else ""))
    for job in found.jobs.items:
        p, standing = job.progress, job.recoverability
        again = f", retry {standing.retry}" if standing.retry else ""
        lines.append(
            f"  {job.job_id} {job.status} ({job.assignee}) for {job.thread_id}: "
            f"{p['completed']}/{p['total']} completed, {p['failed']} failed, "
            f"{p['cancelled']} cancelled, {p['running']} running, {p['pending']} pending: "
            f"{standing.state}{again}"
        )
    lines += [f"unknown: {note}" for note in found.unknown]
    if found.truncated:
        lines.append("(more subagents than shown)")
    return "\n".join(lines)
