"""Types of the `code.run` activity: the input and the result of one sandboxed run (Runtime §13)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from weft.contract.wire import CamelModel

# Stable activity name: renaming it breaks replay of running threads.
ACTIVITY_CODE_RUN = "code.run"

CodeStatus = Literal["success", "error", "link_error", "memory", "terminated"]
LogLevel = Literal["log", "info", "warn", "error", "debug"]


class CodeError(CamelModel):
    """Why a run did not succeed; line and column point into the caller's own source."""

    name: str
    message: str
    stack: str | None = None
    line: int | None = None
    column: int | None = None


class CodeLog(CamelModel):
    """One captured `console.*` call."""

    level: LogLevel
    args: list[Any] = Field(default_factory=list)
    timestamp: float


class CodeExecutionResult(CamelModel):
    """The settled outcome of one `runCode` call, with the exact statuses of the spec."""

    status: CodeStatus
    result: Any = None
    error: CodeError | None = None
    reports: list[Any] = Field(default_factory=list)
    logs: list[CodeLog] = Field(default_factory=list)
    duration_ms: float = 0.0


class CodeRunInput(CamelModel):
    """Source and JSON-able options of one `code.run` activity call.

    Only JSON values cross the Temporal boundary, so `imports` and `globals` here cannot
    carry host functions; callers needing those use `run_code` in-process.
    """

    source: str
    options: dict[str, Any] = Field(default_factory=dict)
