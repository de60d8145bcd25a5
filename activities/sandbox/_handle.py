"""The caller's handle on one sandboxed run: awaitable, terminable, with live reports."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from collections.abc import Generator, Mapping
from typing import Any

from weft.activities.sandbox._facts import FactsObserver, sandbox_facts
from weft.activities.sandbox._marshal import SerializationError, decode
from weft.activities.sandbox._options import OptionError, Prepared, prepare
from weft.activities.sandbox._pool import (
    SandboxPool,
    SandboxStartError,
    WorkerProcess,
    default_pool,
)
from weft.contract.code import CodeError, CodeExecutionResult, CodeLog

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CPU_POLL_S = 0.01
_CRASH_AT_LIMIT = 0.75
MAX_LOGS = 10_000
MAX_REPORTS = 10_000


class CodeExecution:
    """A running `runCode` call (Runtime §13): `await` it for its `CodeExecutionResult`.

    `reports` grows while the code runs; `terminate(reason)` settles it at once with
    status `terminated` (idempotent); `running` is True until it settles.
    """

    def __init__(
        self,
        pool: SandboxPool,
        source: str,
        options: Mapping[str, Any] | None,
        *,
        abort: Any = None,
        observe: FactsObserver | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._observe = observe
        self._observed: asyncio.Task[None] | None = None
        self._t0 = time.perf_counter()
        self._pool = pool
        self.reports: list[Any] = []
        self.logs: list[CodeLog] = []
        self._done: asyncio.Future[CodeExecutionResult] = self._loop.create_future()
        self._worker: WorkerProcess | None = None
        self._prepared: Prepared | None = None
        self._replies: dict[int, asyncio.Future[str]] = {}
        self._next_invoke = 0
        self._in_host_call = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spawn(self._run(source, options))
        if abort is not None:
            self._watch_abort(abort)

    # --- public surface ---

    @property
    def running(self) -> bool:
        return not self._done.done()

    def terminate(self, reason: str | None = None) -> None:
        """Stop the sandbox now and settle `terminated`; later calls do nothing."""
        if self._done.done():
            return
        message = reason if reason is not None else "the run was terminated"
        self._settle({"status": "terminated", "error": {"name": "Terminated", "message": message}})

    def __await__(self) -> Generator[Any, None, CodeExecutionResult]:
        return self._settled().__await__()

    async def _settled(self) -> CodeExecutionResult:
        # Shielded: a caller that stops waiting does not decide the run's fate; terminate does.
        result = await asyncio.shield(self._done)
        if self._observe is not None:
            # The run's sandbox facts are written once, before any awaiter sees the result.
            if self._observed is None:
                facts = sandbox_facts(self._prepared, result)
                self._observed = self._loop.create_task(self._observe(facts))
            await asyncio.shield(self._observed)
        return result

    async def result(self) -> CodeExecutionResult:
        return await self

    # --- the run ---

    def _spawn(self, coro: Any) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _watch_abort(self, abort: Any) -> None:
        reason = "the thread's execution was aborted"
        if isinstance(abort, asyncio.Event):

            async def wait() -> None:
                await abort.wait()
                self.terminate(reason)

            self._spawn(wait())
        elif callable(abort):
            # A registration hook: abort(callback) must call callback() when execution aborts.
            abort(lambda: _call_soon(self._loop, self.terminate, reason))
        else:
            raise TypeError("abort must be an asyncio.Event or a callback registration function")

    async def _run(self, source: str, options: Mapping[str, Any] | None) -> None:
        try:
            await self._start(source, options)
        except asyncio.CancelledError:
            raise
        except SandboxStartError as exc:
            self._settle(
                {"status": "error", "error": {"name": "SandboxStartError", "message": str(exc)}}
            )
        except Exception as exc:  # e.g. a closed pool: the handle must still settle
            self._settle(
                {"status": "error", "error": {"name": "InternalError", "message": str(exc)}}
            )

    async def _start(self, source: str, options: Mapping[str, Any] | None) -> None:
        pool = self._pool
        try:
            self._prepared = prepare(
                source,
                options,
                default_memory_limit=pool.default_memory_limit_bytes,
                memory_ceiling=pool.memory_ceiling_bytes,
                default_cpu_time_limit_ms=pool.default_cpu_time_limit_ms,
            )
        except OptionError as exc:
            self._settle(
                {"status": "link_error", "error": {"name": "OptionError", "message": str(exc)}}
            )
            return
        worker = await pool.acquire()
        if self._done.done():  # terminated while waiting for a worker: it was never used
            pool.release(worker)
            return
        self._worker = worker
        worker.on_message = self._from_thread
        if not worker.send({"t": "run", "job": self._prepared.job}):
            self._settle(_crashed(None))
            return
        if self._prepared.cpu_time_limit_ms is not None:
            self._spawn(self._cpu_watch(worker, self._prepared.cpu_time_limit_ms))

    def _from_thread(self, msg: dict[str, Any]) -> None:
        # Called on the worker's reader thread; everything happens on our loop, in order.
        try:
            self._loop.call_soon_threadsafe(self._on_message, msg)
        except RuntimeError:
            pass  # our loop is closed: nobody is waiting for this run any more

    def _on_message(self, msg: dict[str, Any]) -> None:
        if self._done.done():
            return
        kind = msg.get("t")
        if kind == "call":
            self._spawn(self._host_call(msg))
        elif kind == "ret":
            # Only an int id can be one of ours; anything else finds no pending reply.
            call_id = msg.get("id")
            fut = self._replies.pop(call_id, None) if isinstance(call_id, int) else None
            if fut is not None and not fut.done():
                fut.set_result(msg["reply"])
        elif kind == "log":
            self._log(msg)
        elif kind == "report":
            self._report(msg)
        elif kind == "done":
            self._settle(msg["result"], retire=bool(msg.get("retire")))
        elif kind == "eof":
            self._settle(self._crashed(msg.get("code"), msg.get("growth", 0)), retire=True)

    def _log(self, msg: dict[str, Any]) -> None:
        if len(self.logs) >= MAX_LOGS:
            return  # hostile code could log forever; the host keeps a bounded record
        try:
            entry = json.loads(msg["v"])
            args = [decode(a) if isinstance(a, list) else a for a in entry["args"]]
            self.logs.append(CodeLog(level=entry["level"], args=args, timestamp=msg["ts"]))
        except (ValueError, KeyError, TypeError, SerializationError):
            pass  # a malformed log line from hostile code is dropped, never fatal

    def _report(self, msg: dict[str, Any]) -> None:
        if len(self.reports) >= MAX_REPORTS:
            return  # same bound as logs: the host's memory is not the sandbox's to spend
        try:
            value = decode(json.loads(msg["v"]))
        except (ValueError, SerializationError, RecursionError):
            return
        self.reports.append(value)
        assert self._prepared is not None
        if self._prepared.report is not None:
            try:
                outcome = self._prepared.report(value)
            except Exception:
                return  # a failing report listener must not fail the run
            if inspect.isawaitable(outcome):
                self._spawn(_swallow(outcome))

    async def _host_call(self, msg: dict[str, Any]) -> None:
        assert self._prepared is not None and self._worker is not None
        encoder = self._prepared.encoder
        was_async = False
        self._in_host_call += 1
        try:
            fn = encoder.functions[int(msg["fn"])]
            args = decode(
                json.loads(msg["args"]), host_functions=encoder.functions, invoke=self._invoke
            )
            value = fn(*args)
            if inspect.isawaitable(value):
                was_async = True
                value = await value
            reply = {"v": encoder.encode(value), "a": was_async}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the host function's failure becomes a sandbox exception
            name = (
                "SerializationError" if isinstance(exc, SerializationError) else type(exc).__name__
            )
            reply = {"e": {"name": name, "message": str(exc)}, "a": was_async}
        finally:
            self._in_host_call -= 1
        if not self._done.done():
            self._worker.send({"t": "reply", "id": msg["id"], "reply": json.dumps(reply)})

    async def _invoke(self, fn_id: int, args: list[Any]) -> Any:
        """Call a sandbox function from the host, while the sandbox waits on a host call."""
        if self._done.done() or self._in_host_call == 0 or self._worker is None:
            raise RuntimeError("a sandbox function can only be called during a host call")
        assert self._prepared is not None
        encoder = self._prepared.encoder
        self._next_invoke += 1
        fut: asyncio.Future[str] = self._loop.create_future()
        self._replies[self._next_invoke] = fut
        self._worker.send(
            {
                "t": "invoke",
                "id": self._next_invoke,
                "fn": fn_id,
                "args": json.dumps(encoder.encode(args)),
            }
        )
        reply = json.loads(await asyncio.shield(fut))
        if "e" in reply:
            raise RuntimeError(f"{reply['e']['name']}: {reply['e']['message']}")
        return decode(reply["v"], host_functions=encoder.functions, invoke=self._invoke)

    async def _cpu_watch(self, worker: WorkerProcess, limit_ms: float) -> None:
        # The optional CPU safety cap (§13.4): CPU time of the worker, never wall-clock time.
        start = _cpu_ms(worker.pid)
        if start is None:
            return
        while not self._done.done():
            await asyncio.sleep(_CPU_POLL_S)
            used = _cpu_ms(worker.pid)
            if used is not None and used - start > limit_ms:
                self.terminate(f"CPU time limit of {limit_ms:g} ms exceeded (cpuTimeLimitMs)")
                return

    def _crashed(self, code: int | None, growth: int) -> dict[str, Any]:
        limit = self._prepared.job["memoryLimitBytes"] if self._prepared else 0
        if code is not None and code < 0 and limit and growth >= limit * _CRASH_AT_LIMIT:
            # QuickJS 2021 may crash instead of throwing when an allocation fails; a crash
            # after the worker grew by about the limit is that overrun.
            return {
                "status": "memory",
                "error": {
                    "name": "MemoryError",
                    "message": f"out of memory: the sandbox exceeded its limit of {limit} bytes",
                },
            }
        return _crashed(code)

    def _settle(self, raw: dict[str, Any], *, retire: bool = False) -> None:
        if self._done.done():
            return
        result = self._build(raw)
        self._done.set_result(result)
        for fut in self._replies.values():
            fut.cancel()
        current = asyncio.current_task()
        for task in list(self._tasks):  # host calls, watchers: nothing may outlive the run
            if task is not current:
                task.cancel()
        worker, self._worker = self._worker, None
        if worker is not None:
            if result.status == "terminated" or retire:
                self._pool.discard(worker)
            else:
                self._pool.release(worker)

    def _build(self, raw: dict[str, Any]) -> CodeExecutionResult:
        status, value, error = raw["status"], None, raw.get("error")
        if status == "success":
            try:
                value = decode(json.loads(raw["result"]))
            except (ValueError, SerializationError, RecursionError) as exc:
                status, error = "error", {"name": "SerializationError", "message": str(exc)}
        return CodeExecutionResult(
            status=status,
            result=value,
            error=CodeError(**error) if error else None,
            reports=list(self.reports),
            logs=list(self.logs),
            duration_ms=(time.perf_counter() - self._t0) * 1000,
        )


def _crashed(code: int | None) -> dict[str, Any]:
    return {
        "status": "error",
        "error": {
            "name": "InternalError",
            "message": f"the sandbox process exited unexpectedly (exit status {code})",
        },
    }


def _cpu_ms(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / _CLOCK_TICKS


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the loop is closed, so the run is long settled


async def _swallow(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:
        pass  # a failing report listener must not fail the run


def run_code(
    source: str,
    options: Mapping[str, Any] | None = None,
    *,
    pool: SandboxPool | None = None,
    abort: Any = None,
    observe: FactsObserver | None = None,
) -> CodeExecution:
    """Run `source` in a fresh sandbox (Runtime §13) and return its handle at once.

    Must be called with an event loop running. `abort` terminates the run when it fires:
    an `asyncio.Event`, or a function that registers a zero-argument callback. `observe`
    gets the run's `sandbox.*` facts (limits applied, a violation) once it settles.
    """
    return CodeExecution(pool or default_pool(), source, options, abort=abort, observe=observe)
