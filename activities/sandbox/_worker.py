"""Entry point of a sandbox worker process: run jobs from stdin, one at a time, forever.

The protocol is one JSON object per line. The parent kills this process to terminate a run,
so nothing here needs to be interruptible; a crash here cannot take the parent down.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback
from typing import IO, Any

from weft.activities.sandbox._engine import Engine, rss_kb
from weft.activities.sandbox._wire import HostMessage, Job, is_run

_PR_SET_PDEATHSIG = 1


class PipeChannel:
    """Newline-delimited JSON over the process's own pipes."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            self.writer.flush()
        except BrokenPipeError:
            os._exit(0)  # the parent closed our pipe: it no longer wants this worker

    def recv(self) -> HostMessage:
        line = self.reader.readline()
        if not line:
            os._exit(0)  # the parent is gone: nothing left to do
        msg: HostMessage = json.loads(line)  # the parent is the only writer of this pipe
        return msg

    def settle_now(self, result: dict[str, Any]) -> None:
        self.send({"t": "done", "result": result, "retire": True})
        os._exit(0)


def _die_with_parent() -> None:
    # Linux only: a worker stuck in `while(true){}` never reads stdin, so it cannot notice
    # that its parent died; ask the kernel to kill it instead.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _warm_up() -> None:
    # Pay parser, prelude and first-context costs before reporting ready.
    class _Null:
        def send(self, message: dict[str, Any]) -> None: ...
        def recv(self) -> HostMessage:
            raise RuntimeError("no host during warm-up")

        def settle_now(self, result: dict[str, Any]) -> None: ...

    job: Job = {
        "source": "const x: number = 1; export default x;",
        "filename": "warm.ts",
        "language": "typescript",
        "modules": {},
        "importNames": {},
        "imports": {},
        "globals": ["O", {}],
        "globalNames": [],
        "execute": {"fn": "default", "args": ["A"]},
        "memoryLimitBytes": 16 * 1024 * 1024,
    }
    Engine(job, _Null()).run()


def main() -> None:
    _die_with_parent()
    # Keep the protocol pipe private: anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    channel = PipeChannel(sys.stdin.buffer, out)
    _warm_up()
    channel.send({"t": "ready", "pid": os.getpid(), "rss": rss_kb()})
    while True:
        msg = channel.recv()
        if not is_run(msg):
            continue
        try:
            result = Engine(msg["job"], channel).run()
        except Exception as exc:  # a bug in the engine must still settle the call
            traceback.print_exc()
            result = {"status": "error", "error": {"name": "InternalError", "message": str(exc)}}
        channel.send({"t": "done", "result": result, "rss": rss_kb()})


if __name__ == "__main__":
    main()
