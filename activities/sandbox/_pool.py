"""A pool of pre-warmed sandbox worker processes that can be killed and replaced.

Killing the process is how `terminate()` stops even `while(true){}` at once, and it keeps a
QuickJS crash out of the Temporal worker. The pool works from any event loop: each worker
has a reader thread, and a run hands it a callback bound to its own loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from weft.activities.sandbox._options import DEFAULT_MEMORY_LIMIT_BYTES, MEMORY_CEILING_BYTES

# A worker whose RSS grew this much over its start is replaced, bounding its footprint.
_RETIRE_GROWTH_KB = 16 * 1024
# A worker that has not reported ready by then is taken for dead.
_START_TIMEOUT_S = 60.0
# Starts that may fail in a row before the runs waiting for a worker fail instead: a worker
# that cannot start (weft or quickjs missing, a broken interpreter) would otherwise leave
# every run waiting forever.
_START_ATTEMPTS = 3
# How much of a worker's stderr is kept to say why it could not start.
_STDERR_TAIL_BYTES = 2000
# The worker runs isolated (`-I`: no PYTHON* variables, user site or current folder), and
# imports weft from the search path this process has: the child then runs the same weft,
# whether it comes from a checkout, an editable install or site-packages.
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from weft.activities.sandbox._worker import main; main()"
)


class SandboxStartError(RuntimeError):
    """No sandbox worker could be started: the pool gave up after its attempts."""


def _worker_command(python: str) -> list[str]:
    """The worker's command line: `python`, isolated, given this process's sys.path."""
    search_path = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    return [python, "-I", "-c", _BOOT, json.dumps(search_path)]


class WorkerProcess:
    """One worker subprocess and the threads that read its messages and its stderr."""

    def __init__(self, python: str = sys.executable) -> None:
        self.proc = subprocess.Popen(
            _worker_command(python),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self._stderr_tail = b""
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, name="sandbox-stderr", daemon=True
        )
        self._stderr_reader.start()
        self.ready = threading.Event()
        self.on_message: Callable[[dict[str, Any]], None] | None = None
        self.runs = 0
        self.rss_kb = 0  # as of the worker's last message; runs reset its peak mark
        self.base_rss_kb = 0
        self.dead = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="sandbox-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # only a corrupted worker writes garbage; EOF follows soon
            if "rss" in msg:
                self.rss_kb = int(msg["rss"])
            if msg.get("t") == "ready":
                self.base_rss_kb = self.rss_kb
                self.ready.set()
                continue
            handler = self.on_message
            if handler is not None:
                handler(msg)
        self.dead = True
        code, peak_kb = self._reap()
        # Only now, with the exit status known, wake anyone waiting for it to start.
        self.ready.set()
        handler = self.on_message
        if handler is not None:
            handler({"t": "eof", "code": code, "growth": (peak_kb - self.rss_kb) * 1024})

    def _read_stderr(self) -> None:
        # Passed on to this process's stderr as before, keeping the tail that tells why a
        # worker could not start.
        stderr = self.proc.stderr
        assert stderr is not None
        while chunk := stderr.read(4096):  # unbuffered: returns what is there, b"" at EOF
            self._stderr_tail = (self._stderr_tail + chunk)[-_STDERR_TAIL_BYTES:]
            try:
                os.write(2, chunk)
            except OSError:
                pass
        stderr.close()

    def start_failure(self, *, timed_out: bool) -> str:
        """Why this worker did not become ready: its exit status and the end of its stderr."""
        self._stderr_reader.join(timeout=5)  # the worker is gone: its stderr ends soon
        if timed_out:
            status = f"did not report ready within {_START_TIMEOUT_S:g} s"
        else:
            status = f"exited at start (exit status {self.proc.returncode})"
        tail = self._stderr_tail.decode(errors="replace").strip()
        return f"{status}; its stderr ends: {tail}" if tail else f"{status}; no stderr"

    def _reap(self) -> tuple[int | None, int]:
        # wait4, not Popen.wait: its rusage has the peak RSS, which tells a crash at the
        # memory limit (QuickJS 2021 can segfault when allocation fails) from other crashes.
        try:
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            peak = int(usage.ru_maxrss)
        except ChildProcessError:
            self.proc.poll()
            peak = 0
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        return self.proc.returncode, peak

    def send(self, message: dict[str, Any]) -> bool:
        """Write one message; False if the worker is gone."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            with self._lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def kill(self) -> None:
        """Kill now; the reader thread reaps the process and closes the pipes."""
        self.on_message = None
        self.dead = True
        try:
            self.proc.kill()
        except OSError:
            pass


class SandboxPool:
    """Pre-warmed worker processes for `run_code`; build one per Temporal worker and inject it.

    Keyword-only configuration:
      size: workers kept warm and idle, ready for the next call.
      max_workers: most processes alive at once; further calls wait for one.
      max_runs_per_worker: a worker is replaced after this many runs, bounding slow leaks.
      default_memory_limit_bytes / memory_ceiling_bytes: see docs/run-code.md.
      default_cpu_time_limit_ms: the CPU safety cap when a call sets none (None: no cap).
      python: the interpreter the workers run (default: this process's); it must import
        weft and quickjs from this process's search path.

    A worker that cannot start is retried; after a few failed starts in a row, the runs
    waiting for a worker fail with `SandboxStartError`, naming the worker's exit status
    and the end of its stderr.
    """

    def __init__(
        self,
        *,
        size: int = 2,
        max_workers: int = 8,
        max_runs_per_worker: int = 1000,
        default_memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
        memory_ceiling_bytes: int = MEMORY_CEILING_BYTES,
        default_cpu_time_limit_ms: float | None = None,
        python: str = sys.executable,
    ) -> None:
        if size < 0 or max_workers < 1 or size > max_workers:
            raise ValueError("SandboxPool needs 0 <= size <= max_workers and max_workers >= 1")
        self.python = python
        self.size = size
        self.max_workers = max_workers
        self.max_runs_per_worker = max_runs_per_worker
        self.default_memory_limit_bytes = default_memory_limit_bytes
        self.memory_ceiling_bytes = memory_ceiling_bytes
        self.default_cpu_time_limit_ms = default_cpu_time_limit_ms
        self._lock = threading.Lock()
        self._idle: deque[WorkerProcess] = deque()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = deque()
        self._alive = 0  # processes started and not discarded, idle or busy
        self._starting = 0
        self._failed_starts = 0  # in a row, since the last worker that started or gave up
        self._closed = False
        self._spawn_requests: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._spawner: threading.Thread | None = None

    def start(self) -> SandboxPool:
        """Start warming `size` workers in the background; returns self for chaining."""
        with self._lock:
            missing = self.size - len(self._idle) - self._starting
        for _ in range(max(0, missing)):
            self._spawn_async()
        return self

    def _spawn_async(self) -> None:
        with self._lock:
            if self._closed or self._alive >= self.max_workers:
                return
            self._alive += 1
            self._starting += 1
            if self._spawner is None:
                # Linux delivers a worker's parent-death signal when the *thread* that forked
                # it exits, so every worker is forked by this one long-lived thread.
                self._spawner = threading.Thread(
                    target=self._spawn_forever, name="sandbox-spawner", daemon=True
                )
                self._spawner.start()
        self._spawn_requests.put(None)

    def _spawn_forever(self) -> None:
        while True:
            self._spawn_requests.get()
            try:
                started: WorkerProcess | str = WorkerProcess(self.python)
            except OSError as exc:
                started = f"could not be started with {self.python!r}: {exc}"
            threading.Thread(
                target=self._await_ready, args=(started,), name="sandbox-ready", daemon=True
            ).start()

    def _await_ready(self, started: WorkerProcess | str) -> None:
        """Offer a worker that became ready; count one that did not, and retry or give up."""
        if isinstance(started, WorkerProcess):
            timed_out = not started.ready.wait(timeout=_START_TIMEOUT_S)
            if not started.dead and not timed_out:
                with self._lock:
                    self._starting -= 1
                    self._failed_starts = 0
                self._offer(started)
                return
            started.kill()
            why = f"the sandbox worker {started.start_failure(timed_out=timed_out)}"
        else:
            why = f"the sandbox worker {started}"
        with self._lock:
            self._starting -= 1
            self._alive -= 1
            self._failed_starts += 1
            retry = bool(self._waiters) and self._failed_starts < _START_ATTEMPTS
            given_up: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []
            if self._waiters and not retry:
                given_up, self._waiters = list(self._waiters), deque()
                self._failed_starts = 0  # a later run tries afresh: the cause may be gone
        if retry:
            self._spawn_async()
        error = SandboxStartError(f"{why} ({_START_ATTEMPTS} attempts in a row failed)")
        for loop, fut in given_up:
            _call_soon(loop, _fail, fut, error)

    def _offer(self, worker: WorkerProcess) -> None:
        """Give a ready worker to the first live waiter, or park it as idle."""
        with self._lock:
            if self._closed:
                self._alive -= 1
                worker.kill()
                return
            while self._waiters:
                loop, fut = self._waiters.popleft()
                if not fut.done() and not loop.is_closed():
                    loop.call_soon_threadsafe(_hand_over, fut, worker, self)
                    return
            self._idle.append(worker)

    async def acquire(self) -> WorkerProcess:
        """A ready worker for one run; waits while `max_workers` are all busy."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox pool is closed")
            while self._idle:
                worker = self._idle.popleft()
                if not worker.dead:
                    break
                self._alive -= 1
            else:
                worker = None
            fut: asyncio.Future[WorkerProcess] = loop.create_future()
            if worker is None:
                self._waiters.append((loop, fut))
        if worker is not None:
            self.start()  # keep the warm set topped up
            return worker
        self._spawn_async()
        self.start()
        return await fut

    def release(self, worker: WorkerProcess) -> None:
        """Return a worker after a clean run, or retire it once it has served enough runs."""
        worker.on_message = None
        worker.runs += 1
        if (
            worker.dead
            or worker.runs >= self.max_runs_per_worker
            or worker.rss_kb > worker.base_rss_kb + _RETIRE_GROWTH_KB
        ):
            self.discard(worker)
            return
        self._offer(worker)

    def discard(self, worker: WorkerProcess) -> None:
        """Kill a worker (terminated, crashed or retired) and start a replacement."""
        worker.kill()
        with self._lock:
            self._alive -= 1
            need = bool(self._waiters) or len(self._idle) < self.size
        if need:
            self._spawn_async()

    def close(self) -> None:
        """Kill every idle worker; busy ones are killed as their runs settle, and runs still
        waiting for a worker fail (no worker starts any more)."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            self._alive -= len(idle)
            waiting, self._waiters = list(self._waiters), deque()
        for worker in idle:
            worker.kill()
        closed = RuntimeError("the sandbox pool is closed")
        for loop, fut in waiting:
            _call_soon(loop, _fail, fut, closed)

    def __enter__(self) -> SandboxPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fail(fut: asyncio.Future[Any], error: Exception) -> None:
    if not fut.done():  # a waiter that gave up meanwhile needs no answer
        fut.set_exception(error)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the waiter's loop is closed: nobody is waiting any more


def _hand_over(fut: asyncio.Future[Any], worker: WorkerProcess, pool: SandboxPool) -> None:
    if fut.done():  # the waiter gave up (cancelled) meanwhile: the worker goes back
        pool._offer(worker)
    else:
        fut.set_result(worker)


_default: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The process-wide pool used when `run_code` gets none; created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            import atexit

            _default = SandboxPool(size=min(2, os.cpu_count() or 1)).start()
            atexit.register(_default.close)
        return _default
