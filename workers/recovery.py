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
- An activity retried here while an earlier attempt still runs here joins that attempt
  instead of calling the provider or the tool again. Temporal times out a live attempt
  whose heartbeats do not arrive in time (a stalled event loop, a slow server, eager
  dispatch under load); the work goes on, and the retry reports its result. Only a
  cancel that means it (the workflow asked, the worker is shutting down, an operator
  paused or reset the activity) stops the work.
"""

from __future__ import annotations

import asyncio
import inspect
import pickle
import time
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from weft.activities.streaming import Heartbeater
from weft.workers.config import WorkerConfig
from weft.workers.eager_gate import StartDelays

# Attempts this worker started, to tell a retry of its own attempt from one that ran elsewhere.
REMEMBERED_ATTEMPTS = 10_000
# Results of the attempts that finished here, for a retry whose report was lost: kept for
# as long as a retry can come (a heartbeat timeout, the retry's backoff, an outage of a
# few minutes), and at most this many. The last 256 alone were too few under load: at 200
# threads a worker finishes about 100 activities a second, so they covered less than a
# heartbeat timeout and the retry's backoff. A result is small (history keeps previews of
# large outputs), so this holds tens of MB at most.
REMEMBERED_RESULTS = 20_000
RESULTS_KEPT = timedelta(minutes=5)
# How often expired results are dropped while no activity finishes.
RESULTS_SWEEP_SECONDS = 30.0
UNSTICK_TIMEOUT = timedelta(seconds=2)
# How long the work of a timed-out attempt may go on for a retry to join, when the activity
# has no start-to-close timeout of its own to bound it.
ORPHAN_LIMIT = timedelta(minutes=5)


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


class _KeptResult:
    """A finished attempt's result, kept as pickled bytes where it can be.

    Thousands are kept for minutes, and a result held as objects (a model call's message,
    usage, context report: about a dozen containers) is walked by every full garbage
    collection (gc_policy.py); bytes are not. A result pickle refuses is kept as it is.
    """

    __slots__ = ("_pickled", "_value")

    def __init__(self, result: Any) -> None:
        try:
            self._pickled: bytes | None = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            self._value = None
        except Exception:  # any result must be kept, pickled or not
            self._pickled, self._value = None, result

    @property
    def pickled_bytes(self) -> int:
        """The size of the pickled copy (0 for a result kept as it is)."""
        return 0 if self._pickled is None else len(self._pickled)

    def finished(self) -> Finished:
        """The result as the attempt returned it (an equal copy, when pickled)."""
        if self._pickled is None:
            return Finished(self._value)
        return Finished(pickle.loads(self._pickled))  # this process's own bytes


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

    def __init__(
        self,
        client: Client,
        *,
        heartbeat_every_seconds: float,
        start_delays: StartDelays | None = None,
    ) -> None:
        self._client = client
        self._every = heartbeat_every_seconds
        self._delays = start_delays
        self._attempts: OrderedDict[ActivityKey, int] = OrderedDict()
        # Oldest first, with when each finished (time.monotonic()).
        self._results: OrderedDict[ActivityKey, tuple[float, _KeptResult]] = OrderedDict()
        # The work of attempts running here, which a retry of the same activity joins.
        self._running: dict[ActivityKey, asyncio.Task[Any]] = {}

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RecoveringActivity(next, self)

    def arrived(self, info: activity.Info) -> bool:
        """Report how late an attempt with a heartbeat timeout reached this worker after
        Temporal marked it started; whether it is late enough that its first heartbeat must
        not wait (never, without a heartbeat timeout)."""
        if info.heartbeat_timeout is None:
            return False
        delay = (_utcnow() - info.started_time).total_seconds()
        timeout = info.heartbeat_timeout.total_seconds()
        if self._delays is not None:
            self._delays.observe(delay, timeout)
        # The first beat would come an interval after now: past half the timeout, send it
        # at once, so a late arrival costs a heartbeat and not a retry.
        return delay + self._every > timeout / 2

    def previous_attempt_ran_elsewhere(self, info: activity.Info) -> bool:
        """Remember this attempt; whether the one before it did not start on this worker."""
        key = _key(info)
        before = self._attempts.get(key)
        _remember(self._attempts, key, info.attempt, REMEMBERED_ATTEMPTS)
        return info.attempt > 1 and before != info.attempt - 1

    def finished(self, info: activity.Info, result: Any) -> None:
        """Keep the result of an attempt that returned, for a retry after a lost report."""
        now = time.monotonic()
        _remember(self._results, _key(info), (now, _KeptResult(result)), REMEMBERED_RESULTS)
        self.forget_expired(now)

    def forget_expired(self, now: float | None = None) -> None:
        """Drop the results kept longer than `RESULTS_KEPT`."""
        kept_since = (time.monotonic() if now is None else now) - RESULTS_KEPT.total_seconds()
        while self._results and next(iter(self._results.values()))[0] < kept_since:
            self._results.popitem(last=False)

    def kept_results(self) -> tuple[int, int]:
        """How many finished attempts' results are kept, and their pickled bytes: memory
        that follows the last `RESULTS_KEPT` of activity, not the number of threads."""
        return len(self._results), sum(kept.pickled_bytes for _, kept in self._results.values())

    async def forget_expired_every(self, seconds: float) -> None:
        """`forget_expired` every `seconds` until cancelled: a worker gone idle (its threads
        waiting for their next message) finishes no activity that would drop them, and
        would keep its last minutes' results, thousands under load, until one came."""
        while True:
            await asyncio.sleep(seconds)
            self.forget_expired()

    def earlier_result(self, info: activity.Info) -> Finished | None:
        """What an earlier attempt of this activity that finished here returned."""
        kept = self._results.get(_key(info)) if info.attempt > 1 else None
        return kept[1].finished() if kept is not None else None

    def running(self, info: activity.Info) -> asyncio.Task[Any] | None:
        """The work of an earlier attempt of this activity, still running here."""
        return self._running.get(_key(info)) if info.attempt > 1 else None

    def start(self, info: activity.Info, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run an attempt's work as a task of its own, so a timeout of the attempt that
        started it does not stop it; its result is kept for a retry."""
        key = _key(info)
        task = asyncio.create_task(work)
        self._running[key] = task

        def ended(done: asyncio.Task[Any]) -> None:
            if self._running.get(key) is done:
                del self._running[key]
            if done.cancelled():
                return
            if done.exception() is None:  # also marks a failure seen when nobody awaits it
                self.finished(info, done.result())

        task.add_done_callback(ended)
        return task

    def abandon(self, info: activity.Info, task: asyncio.Task[Any]) -> None:
        """Temporal timed out the attempt that awaited `task`: let the work go on for a retry
        to join, but no longer than the attempt's own timeout allowed it."""
        limit = info.start_to_close_timeout or info.schedule_to_close_timeout or ORPHAN_LIMIT
        left = limit.total_seconds() - (_utcnow() - info.started_time).total_seconds()
        if left <= 0:
            task.cancel()
        else:
            asyncio.get_running_loop().call_later(left, task.cancel)

    async def stop_abandoned(self) -> None:
        """Stop the work no attempt awaits any more; called once the worker has stopped
        (its own attempts are done by then, so only abandoned work is left)."""
        left = list(self._running.values())
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)

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

    async def run_closed(self, info: activity.Info) -> bool:
        """Whether the workflow run that started this attempt has closed: then no attempt
        can ever report a result, and the work is stopped rather than left for a retry."""
        handle = self._client.get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id or None
        )
        try:
            described = await handle.describe(rpc_timeout=UNSTICK_TIMEOUT)
        except Exception as error:  # unknown: keep the work for a retry, as before
            activity.logger.warning("could not tell whether the thread closed: %s", error)
            return False
        return described.status not in (None, WorkflowExecutionStatus.RUNNING)

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
        recovery = self._recovery
        late = recovery.arrived(info)
        earlier = recovery.earlier_result(info)
        if earlier is not None:
            activity.logger.info("attempt %d: the result of an earlier attempt", info.attempt)
            return earlier.result
        ran_elsewhere = recovery.previous_attempt_ran_elsewhere(info)
        work = recovery.running(info)
        if work is not None:
            activity.logger.info("attempt %d joins an earlier attempt still running", info.attempt)
        else:
            if ran_elsewhere:
                await recovery.unstick(info)
            work = recovery.start(info, self.next.execute_activity(input))
        try:
            if info.heartbeat_timeout is None:
                return await asyncio.shield(work)
            async with Heartbeater(every=recovery.heartbeat_every, wait_first=not late):
                return await asyncio.shield(work)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None and work.cancelled():
                # The work ran out its time while this retry waited on it: run afresh.
                raise ApplicationError(
                    "the earlier attempt this one joined ran past its timeout"
                ) from None
            if _superseded(details) and not (
                details is not None and details.not_found and await recovery.run_closed(info)
            ):
                recovery.abandon(info, work)
                raise
            # Meant: stop the work, and report how it ended once it has stopped.
            work.cancel()
            await asyncio.wait([work])
            if work.cancelled():
                raise
            return work.result()


def _superseded(details: activity.ActivityCancellationDetails | None) -> bool:
    """Temporal gave up on this attempt (timed out, or no longer knows it), and nobody
    asked for the work to stop."""
    if details is None:
        return False
    meant = details.cancel_requested or details.worker_shutdown or details.paused or details.reset
    return (details.timed_out or details.not_found) and not meant


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _remote_async(info: activity.Info, input: ExecuteActivityInput) -> bool:
    """Local activities have no heartbeat and no attempt elsewhere, and a sync activity's
    heartbeat must be called from its own thread."""
    return not info.is_local and inspect.iscoroutinefunction(input.fn)
