"""Under which version an activity may reuse the thread's env this worker kept.

`model.call` reads the thread's env for its system prompt and tools, `tool.call` its user
and env for the ThreadState. Only `set_env` changes them after the thread starts, and the
workflow counts each one it applies (`Counters.env_writes`), so the row read at one count
is still the row at that count (store/thread_env_rows.py says when it is not).
"""

from __future__ import annotations

from collections.abc import Hashable

from temporalio import activity


def env_version(env_writes: int | None, info: activity.Info) -> Hashable | None:
    """The version under which this worker may keep the thread's user and env: the run and
    the workflow's count of env writes. None for a retry, whose failed attempt may have set
    env the workflow never heard of, and for a workflow that does not count."""
    if env_writes is None or info.attempt > 1:
        return None
    return (info.workflow_run_id, env_writes)
