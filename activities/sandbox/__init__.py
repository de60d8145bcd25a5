"""runCode: the sandboxed JavaScript/TypeScript runtime of Standard Agents Runtime §13.

Each call runs in a fresh QuickJS context inside a pre-warmed worker process of a
`SandboxPool`; see docs/run-code.md for the caller contract.
"""

from weft.activities.sandbox._facts import FactsObserver, SandboxFact, sandbox_facts
from weft.activities.sandbox._handle import CodeExecution, run_code
from weft.activities.sandbox._marshal import JSMap, SandboxFunction, SerializationError, to_jsonable
from weft.activities.sandbox._options import DEFAULT_MEMORY_LIMIT_BYTES, MEMORY_CEILING_BYTES
from weft.activities.sandbox._pool import SandboxPool, SandboxStartError, default_pool
from weft.contract.code import CodeError, CodeExecutionResult, CodeLog

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "MEMORY_CEILING_BYTES",
    "CodeError",
    "CodeExecution",
    "CodeExecutionResult",
    "CodeLog",
    "FactsObserver",
    "JSMap",
    "SandboxFunction",
    "SandboxFact",
    "SandboxPool",
    "SandboxStartError",
    "SerializationError",
    "default_pool",
    "run_code",
    "sandbox_facts",
    "to_jsonable",
]
