"""The Agent Runtime `sandbox.*` facts of one run: the limits in force (`sandbox.applied`)
and what the sandbox refused (`sandbox.violation`): eval or a function constructor, an
import it cannot resolve, memory over the limit or over the ceiling, the CPU cap.

Pure: the caller that knows the thread (a tool's ThreadState) writes them as events.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from weft.activities.sandbox._options import Prepared
from weft.contract.code import CodeExecutionResult

# (id suffix, event type, payload) of one fact of a run.
SandboxFact = tuple[str, str, dict[str, Any]]
# Writes a run's facts; awaited before the run's result reaches its caller.
FactsObserver = Callable[[list[SandboxFact]], Coroutine[Any, Any, None]]

# What every run is denied, whatever its options (docs/run-code.md, Isolation).
DENIED = ["eval", "functionConstructor", "urlImports", "sharedMemory", "hostGlobals"]


def sandbox_facts(prepared: Prepared | None, result: CodeExecutionResult) -> list[SandboxFact]:
    """`sandbox.applied` when the run was prepared (its options were valid), then
    `sandbox.violation` when it ended on something the sandbox refuses."""
    facts: list[SandboxFact] = []
    if prepared is not None:
        facts.append(("applied", "sandbox.applied", applied(prepared)))
    kind = violation_kind(result)
    if kind is not None and result.error is not None:
        payload: dict[str, Any] = {
            "kind": kind,
            "status": result.status,
            "error": result.error.name,
            "message": result.error.message,
        }
        if kind == "memory" and prepared is not None:
            payload["memoryLimitBytes"] = prepared.job["memoryLimitBytes"]
        facts.append(("violation", "sandbox.violation", payload))
    return facts


def applied(prepared: Prepared) -> dict[str, Any]:
    """The boundaries of a prepared run."""
    job = prepared.job
    return {
        "engine": "quickjs",
        "language": job["language"],
        "memoryLimitBytes": job["memoryLimitBytes"],
        "cpuTimeLimitMs": prepared.cpu_time_limit_ms,
        "imports": sorted(job["importNames"]),
        "modules": sorted(job["modules"]),
        "denied": list(DENIED),
    }


def violation_kind(result: CodeExecutionResult) -> str | None:
    """Which refusal ended the run (`eval`, `import`, `memory`, `cpu`), None for any other
    outcome (success, the code's own errors, a termination)."""
    error = result.error
    if error is None:
        return None
    if result.status == "memory" or (
        error.name == "OptionError" and "memoryLimitBytes" in error.message
    ):
        return "memory"  # over the limit, or a limit asked over the ceiling (§13.4)
    if error.name == "EvalError":
        return "eval"
    if result.status == "link_error" and (
        "cannot import" in error.message or "cannot resolve" in error.message
    ):
        return "import"
    if result.status == "terminated" and "cpuTimeLimitMs" in error.message:
        return "cpu"
    return None
