"""What a worker does so that threads move again soon after a failure (docs/recovery.md).

- The `Worker` options that bound recovery, from `WorkerConfig`.
- Every activity heartbeats from its first moment to its last. A thread's heartbeat
  timeout (`options.heartbeatTimeoutSeconds`, 3 s by default) is how soon Temporal gives
  a dead worker's activity to another worker; the activities heartbeat while they wait on
  a provider or a tool, but not while they open their first transaction or store their
  result, and under load those waits can last seconds (the thread pool's queue, SQLite's
  write lock). Timed out there, an activity that is alive, or done, would run twice.
- An activity retried here after an attempt elsewhere clears its thread's sticky queue:
  the worker that ran that attempt may be dead, and the thread's next workflow task would
  otherwise wait the sticky schedule-to-start timeout on that dead worker's queue.
- An activity retried here after an attempt that finished here gets that attempt's result
  back without running again. This happens when Temporal was away longer than the
  heartbeat timeout: on its return it times out every activity it has not heard from,
  finished ones included, and the worker's report of the result was lost.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from weft.activities.streaming import Heartbeater
from weft.workers.config import WorkerConfig

# Attempts this worker started, to tell a retry of its own attempt from one that ran elsewhere.
REMEMBERED_ATTEMPTS = 10_000
# Results of the attempts that finished here last: more than the activities a worker runs at
# once (100 by default), the ones an outage can catch between finishing and reporting. A
# result is small (history keeps previews of large outputs), so this holds a few MB.
REMEMBERED_RESULTS = 256
UNSTICK_TIMEOUT = timedelta(seconds=2)


def recovery_options(worker: WorkerConfig) -> dict[str, Any]:
    """The `Worker` options that bound how soon a thread moves again after a failure."""
    throttle = timedelta(seconds=worker.heartbeat_throttle_seconds)
    return {
        # A dead worker's sticky queue holds a thread's next workflow task this long before
        # any other worker may take it.
        "sticky_queue_schedule_to_start_timeout": timedelta(
            seconds=worker.sticky_schedule_to_start_seconds
        ),
        # Heartbeats carry cancellation and prove the worker alive; the SDK sends them at
        # most this often (and at least every 0.8 x the heartbeat timeout).
        "max_heartbeat_throttle_interval": throttle,
        "default_heartbeat_throttle_interval": throttle,
        "graceful_shutdown_timeout": timedelta(seconds=worker.graceful_shutdown_seconds),
        # An eagerly dispatched activity is started on the server before this worker has
        # it, so its heartbeat timeout runs while it waits (docs/recovery.md).
        "disable_eager_activity_execution": not worker.eager_activities,
    }


ActivityKey = tuple[str, str, str]


@dataclass(frozen=True)
class Finished:
    """What an attempt that finished returned (possibly None)."""

    result: Any


def _key(info: activity.Info) -> ActivityKey:
    """One scheduled activity of one workflow run, across its attempts."""
    return (info.workflow_id or "", info.workflow_run_id or "", info.activity_id)


def _remember(book: OrderedDict[ActivityKey, Any], key: ActivityKey, value: Any, size: int) -> None:
    book.pop(key, None)
    book[key] = value
    if len(book) > size:
        book.popitem(last=False)


class RecoveryInterceptor(Interceptor):
    """Heartbeats around every activity; unsticks a thread whose activity comes back here
    after an attempt on another worker; answers a retry of an attempt that finished here
    with its result."""

    def __init__(self, client: Client, *, heartbeat_every_seconds: float) -> None:
        self._client = client
        self._every = heartbeat_every_seconds
        self._attempts: OrderedDict[ActivityKey, int] = OrderedDict()
        self._results: OrderedDict[ActivityKey, Finished] = OrderedDict()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RecoveringActivity(next, self)

    def previous_attempt_ran_elsewhere(self, info: activity.Info) -> bool:
        """Remember this attempt; whether the one before it did not start on this worker."""
        key = _key(info)
        before = self._attempts.get(key)
        _remember(self._attempts, key, info.attempt, REMEMBERED_ATTEMPTS)
        return info.attempt > 1 and before != info.attempt - 1

    def finished(self, info: activity.Info, result: Any) -> None:
        """Keep the result of an attempt that returned, for a retry after a lost report."""
        _remember(self._results, _key(info), Finished(result), REMEMBERED_RESULTS)

    def earlier_result(self, info: activity.Info) -> Finished | None:
        """What an earlier attempt of this activity that finished here returned."""
        return self._results.get(_key(info)) if info.attempt > 1 else None

    async def unstick(self, info: activity.Info) -> None:
        """Send the thread's next workflow task to the task queue every worker polls."""
        request = ResetStickyTaskQueueRequest(
            namespace=info.workflow_namespace or self._client.namespace,
            execution=WorkflowExecution(
                workflow_id=info.workflow_id or "", run_id=info.workflow_run_id or ""
            ),
        )
        try:
            await self._client.workflow_service.reset_sticky_task_queue(
                request, timeout=UNSTICK_TIMEOUT
            )
        except Exception as error:  # only a faster recovery is lost: never fail the activity
            activity.logger.warning("could not reset the sticky queue: %s", error)

    @property
    def heartbeat_every(self) -> float:
        return self._every


class _RecoveringActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, recovery: RecoveryInterceptor) -> None:
        super().__init__(next)
        self._recovery = recovery

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if not _remote_async(info, input):
            return await self.next.execute_activity(input)
        earlier = self._recovery.earlier_result(info)
        if earlier is not None:
            activity.logger.info("attempt %d: the result of an earlier attempt", info.attempt)
            return earlier.result
        if self._recovery.previous_attempt_ran_elsewhere(info):
            await self._recovery.unstick(info)
        if info.heartbeat_timeout is None:
            result = await self.next.execute_activity(input)
        else:
            async with Heartbeater(every=self._recovery.heartbeat_every, wait_first=True):
                result = await self.next.execute_activity(input)
        self._recovery.finished(info, result)
        return result


def _remote_async(info: activity.Info, input: ExecuteActivityInput) -> bool:
    """Local activities have no heartbeat and no attempt elsewhere, and a sync activity's
    heartbeat must be called from its own thread."""
    return not info.is_local and inspect.iscoroutinefunction(input.fn)
