"""Run one job in a fresh QuickJS context; this is the code that lives in a worker process.

The job arrives already validated and with host values encoded; host functions are reached
through `channel`, which blocks on the parent's reply (the sandbox has no other async work).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, Literal, Protocol, overload

import _quickjs  # type: ignore[import-not-found]  # C extension of `quickjs`, ships no stubs

from weft.activities.sandbox._erase import SourceError
from weft.activities.sandbox._link import Bundle, Linker
from weft.activities.sandbox._wire import HostMessage, InvokeMessage, Job

_FRAME = re.compile(r"^(\s*at )(.*?)\s*\(<input>(?::(\d+))?\)\s*$")
_COMPILE_LINE = re.compile(r"^\s*at <input>:(\d+)\s*$", re.M)
DEFAULT_STACK_BYTES = 512 * 1024
_NEAR_LIMIT_BYTES = 256 * 1024
_PEAK_AT_LIMIT = 0.75


class Channel(Protocol):
    """How the engine talks to the host: fire-and-forget sends, and blocking receives."""

    def send(self, message: dict[str, Any]) -> None: ...

    def recv(self) -> HostMessage: ...

    def settle_now(self, result: dict[str, Any]) -> None:
        """Deliver a final result before the code stops; a worker exits right after."""


class _JSContext(Protocol):
    """The part of `_quickjs.Context` the engine uses; JS values come back as `Any`."""

    def set_memory_limit(self, limit: int, /) -> None: ...

    def set_max_stack_size(self, limit: int, /) -> None: ...

    def add_callable(self, name: str, fn: Callable[..., Any], /) -> None: ...

    def eval(self, code: str, /) -> Any: ...

    def get(self, name: str, /) -> Any: ...

    def memory(self) -> dict[str, int]: ...

    def execute_pending_job(self) -> bool: ...


class _Runtime(Protocol):
    """The prelude's `dispatch(op, a, b, c)` (see _runtime.js): what each op returns."""

    @overload
    def __call__(self, op: Literal["load", "synthetic", "params", "start"], *a: Any) -> None: ...

    @overload
    def __call__(self, op: Literal["outcome"]) -> str | None: ...

    @overload
    def __call__(self, op: Literal["invoke"], fn: int, args: str, /) -> str: ...

    @overload
    def __call__(self, op: Literal["collect"], token: int, /) -> str | None: ...


@cache
def prelude() -> str:
    # Joined into one line so every stack frame of the runtime reports line 1 (see the file).
    text = resources.files("weft.activities.sandbox").joinpath("_runtime.js").read_text()
    return " ".join(text.splitlines())


def _error(status: str, name: str, message: str, **extra: Any) -> dict[str, Any]:
    err = {"name": name, "message": message}
    err.update({k: v for k, v in extra.items() if v is not None})
    return {"status": status, "error": err}


def _status_kb(field: bytes) -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_kb() -> int:
    """Current resident set size of this process, in KiB (0 where /proc is missing)."""
    return _status_kb(b"VmRSS:")


def peak_rss_kb() -> int:
    """Peak resident set size since the last `reset_peak_rss()`, in KiB."""
    return _status_kb(b"VmHWM:")


def reset_peak_rss() -> int:
    """Reset the kernel's peak-RSS mark (Linux clear_refs 5) and return the current RSS.

    Each run then has its own peak, so a crash at the memory limit is attributable to it.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return rss_kb()


class Engine:
    """One run: link, compile, evaluate, resolve the configured export and marshal it out."""

    def __init__(self, job: Job, channel: Channel) -> None:
        self.job = job
        self.channel = channel
        self.next_call = 0
        self.bundle: Bundle | None = None
        self.linker: Linker | None = None
        self.fatal: dict[str, Any] | None = None
        self._ctx: _JSContext | None = None
        self._rt: _Runtime | None = None
        self._rss0 = 0

    def run(self) -> dict[str, Any]:
        job = self.job
        params = list(dict.fromkeys(["console", "report", *job["globalNames"]]))
        self.linker = Linker(
            filename=job["filename"],
            modules=job["modules"],
            import_names=job["importNames"],
            typescript=job["language"] == "typescript",
            params=params,
        )
        try:
            self.bundle = self.linker.link(job["source"])
        except SourceError as exc:
            return self._source_error(exc)
        self._rss0 = reset_peak_rss()
        ctx: _JSContext = _quickjs.Context()
        ctx.set_memory_limit(job["memoryLimitBytes"])
        ctx.set_max_stack_size(DEFAULT_STACK_BYTES)
        try:
            return self._evaluate(ctx, params)
        except _quickjs.JSException as exc:
            return self._escaped(str(exc.args[0]) if exc.args else str(exc))
        finally:
            del ctx

    def _evaluate(self, ctx: _JSContext, params: list[str]) -> dict[str, Any]:
        job, bundle = self.job, self.bundle
        assert bundle is not None
        ctx.add_callable("__weft_host", self._host_call)
        ctx.add_callable("__weft_emit", self._emit)
        ctx.add_callable("__weft_resolve", self._resolve)
        factory = ctx.eval(prelude())
        self._ctx = ctx
        rt: _Runtime = factory(
            ctx.get("__weft_host"), ctx.get("__weft_emit"), ctx.get("__weft_resolve")
        )
        self._rt = rt
        try:
            program = ctx.eval(bundle.text)
        except _quickjs.JSException as exc:
            return self._compile_error(str(exc.args[0]))
        rt("load", program)
        rt("synthetic", json.dumps(job["imports"]))
        rt("params", json.dumps(params), json.dumps(job["globals"]))
        execute = job["execute"]
        rt("start", bundle.entry, execute["fn"], json.dumps(execute["args"]))
        self._drain(ctx)
        raw = rt("outcome")
        if raw is None:
            result = _error(
                "error",
                "DeadlockError",
                "the module never settled: it awaits a promise that nothing can resolve",
            )
        else:
            result = self._outcome(json.loads(raw))
        if result["status"] == "error" and (self._near_limit(ctx) or self._grew_to_limit()):
            # An allocation failure can surface as `null` or break the promise machinery
            # instead of throwing "out of memory"; a heap at its limit tells us what happened.
            return _error("memory", "MemoryError", self._memory_message())
        return result

    def _grew_to_limit(self) -> bool:
        # The heap may be freed again by now; the process's peak RSS still remembers it.
        grown = (peak_rss_kb() - self._rss0) * 1024
        return grown >= self.job["memoryLimitBytes"] * _PEAK_AT_LIMIT

    def _near_limit(self, ctx: _JSContext) -> bool:
        used = ctx.memory().get("malloc_size", 0)
        return bool(used >= self.job["memoryLimitBytes"] - _NEAR_LIMIT_BYTES)

    @staticmethod
    def _drain(ctx: _JSContext) -> None:
        while ctx.execute_pending_job():
            pass

    def _outcome(self, out: dict[str, Any]) -> dict[str, Any]:
        if self.fatal is not None:
            return self.fatal
        kind = out["kind"]
        if kind == "memory":
            return _error("memory", "MemoryError", self._memory_message())
        if kind == "success":
            return {"status": "success", "result": out["value"]}
        line, stack = self.map_stack(out.get("stack"))
        return _error(kind, out["name"], out["message"], stack=stack, line=line)

    def map_stack(self, stack: str | None) -> tuple[int | None, str | None]:
        """Rewrite `<input>:N` frames to the caller's module and line; drop runtime frames."""
        if not stack or self.bundle is None:
            return None, None
        frames, first_line = [], None
        for raw in stack.splitlines():
            m = _FRAME.match(raw)
            if not m:
                continue
            where = self.bundle.locate(int(m.group(3))) if m.group(3) else None
            if where is None:
                continue
            name = m.group(2)
            name = {"<anonymous>": "<module>", "": "<module>", "$__d": "default"}.get(name, name)
            frames.append(f"    at {name} (sandbox:{where[0]}:{where[1]})")
            first_line = first_line or where[1]
        return first_line, "\n".join(frames) or None

    def _source_error(self, exc: SourceError) -> dict[str, Any]:
        where = f" ({exc.module}:{exc.line}:{exc.column})" if exc.line else ""
        return _error("link_error", exc.name, exc.message + where, line=exc.line, column=exc.column)

    def _compile_error(self, text: str) -> dict[str, Any]:
        message = text.splitlines()[0] if text else "SyntaxError"
        name, _, msg = message.partition(": ")
        line = None
        m = _COMPILE_LINE.search(text)
        if m and self.bundle is not None:
            where = self.bundle.locate(int(m.group(1)))
            if where is not None:
                line = where[1]
                msg = f"{msg} ({where[0]}:{line})"
        return _error("link_error", name or "SyntaxError", msg, line=line)

    def _escaped(self, text: str) -> dict[str, Any]:
        # Errors that escape the runtime's own try/catch: out of memory, stack overflow, etc.
        first = text.splitlines()[0] if text else "InternalError"
        name, _, msg = first.partition(": ")
        if "out of memory" in first:
            return _error("memory", "MemoryError", self._memory_message())
        line, stack = self.map_stack(text)
        return _error("error", name or "InternalError", msg or first, stack=stack, line=line)

    def _memory_message(self) -> str:
        return (
            f"out of memory: the sandbox exceeded its limit of {self.job['memoryLimitBytes']} bytes"
        )

    # --- callables installed in the context (called from JS, on this thread) ---

    def _host_call(self, fn_id: Any, args: str) -> str:
        self.next_call += 1
        call_id = self.next_call
        self.channel.send({"t": "call", "id": call_id, "fn": int(fn_id), "args": args})
        while True:
            msg = self.channel.recv()
            if msg["t"] == "reply" and msg["id"] == call_id:
                return msg["reply"]
            if msg["t"] == "invoke":
                self.channel.send({"t": "ret", "id": msg["id"], "reply": self._invoke(msg)})

    def _invoke(self, msg: InvokeMessage) -> str:
        # The host calls back a sandbox function while the sandbox waits on that host call.
        rt, ctx = self._rt, self._ctx
        assert rt is not None and ctx is not None  # set by _evaluate before any JS runs
        raw = rt("invoke", int(msg["fn"]), msg["args"])
        reply = json.loads(raw)
        if "token" not in reply:
            return raw
        self._drain(ctx)
        got = rt("collect", reply["token"])
        if got is None:
            return json.dumps(
                {"e": {"name": "Error", "message": "the callback's promise never settled"}}
            )
        return got

    def _emit(self, kind: str, payload: str) -> None:
        if kind == "fatal":
            # A dynamic import of a URL or unknown specifier fails the whole run (§13.1), even
            # if the sandbox catches the rejection, so the worker settles and retires now.
            info = json.loads(payload)
            assert self.linker is not None
            self.fatal = _error("link_error", "LinkError", self.linker.explain(info["spec"]))
            self.channel.settle_now(self.fatal)
            return
        self.channel.send({"t": kind, "v": payload, "ts": time.time() * 1000})

    def _resolve(self, importer: str, spec: str) -> str:
        assert self.linker is not None
        return self.linker.resolve(importer, spec) or ""
