"""Validate `runCode` options and turn them into a job a worker can run.

Any problem here settles the call with `link_error` and a message naming the option, before
a worker is involved. Unknown keys are rejected (SPEC-NOTES, Code execution).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from weft.activities.sandbox._marshal import Encoder, SerializationError
from weft.activities.sandbox._wire import ExecuteSpec, Job

MIB = 1024 * 1024
DEFAULT_MEMORY_LIMIT_BYTES = 64 * MIB
MEMORY_CEILING_BYTES = 1024 * MIB
MIN_MEMORY_LIMIT_BYTES = 1 * MIB
KNOWN_OPTIONS = (
    "language",
    "imports",
    "modules",
    "globals",
    "execute",
    "memoryLimitBytes",
    "filename",
    "report",
    "cpuTimeLimitMs",
)
_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
# Names that cannot be module-scope parameters in strict code, plus our runtime's own.
_RESERVED = set(keyword.kwlist) | {
    "eval", "arguments", "await", "yield", "let", "static", "implements", "interface",
    "package", "private", "protected", "public", "enum", "this", "super", "new", "typeof",
    "void", "delete", "instanceof", "var", "const", "function", "switch", "case", "default",
    "throw", "catch", "finally", "do", "debugger", "null", "true", "false", "export", "extends",
}  # fmt: skip


class OptionError(ValueError):
    """An invalid option; the message names it."""


@dataclass
class Prepared:
    """A validated call: the job for the worker and the host-only parts kept here."""

    job: Job
    encoder: Encoder
    report: Callable[[Any], Any] | None
    cpu_time_limit_ms: float | None


def prepare(
    source: Any,
    options: Mapping[str, Any] | None,
    *,
    default_memory_limit: int = DEFAULT_MEMORY_LIMIT_BYTES,
    memory_ceiling: int = MEMORY_CEILING_BYTES,
    default_cpu_time_limit_ms: float | None = None,
) -> Prepared:
    """Check `source` and `options`; raise OptionError with a clear message if invalid."""
    if not isinstance(source, str):
        raise OptionError(f"source must be a string, not {type(source).__name__}")
    opts = dict(options or {})
    if not isinstance(options, Mapping | None):
        raise OptionError("options must be an object")
    unknown = [k for k in opts if k not in KNOWN_OPTIONS]
    if unknown:
        raise OptionError(f"unknown option {unknown[0]!r} (known: {', '.join(KNOWN_OPTIONS)})")
    language = opts.get("language", "typescript")
    if language not in ("typescript", "javascript"):
        raise OptionError(
            f"options.language must be 'typescript' or 'javascript', not {language!r}"
        )
    filename = opts.get("filename", "main.ts" if language == "typescript" else "main.js")
    if not isinstance(filename, str) or not filename or "\n" in filename:
        raise OptionError("options.filename must be a non-empty single-line string")
    encoder = Encoder()
    imports = _mapping(opts, "imports")
    import_names: dict[str, list[str]] = {}
    encoded_imports: dict[str, Any] = {}
    for spec, value in imports.items():
        if not isinstance(spec, str) or not spec or spec.startswith((".", "/")) or ":" in spec:
            raise OptionError(f"options.imports key {spec!r} must be a bare specifier")
        if not isinstance(value, Mapping):
            raise OptionError(
                f"options.imports[{spec!r}] must be a mapping of export names to values"
            )
        import_names[spec] = [str(k) for k in value]
        encoded_imports[spec] = _encode(encoder, value, f"options.imports[{spec!r}]")
    modules = _mapping(opts, "modules")
    for spec, text in modules.items():
        if not isinstance(spec, str) or not spec.startswith(("./", "../")):
            raise OptionError(f"options.modules key {spec!r} must be a relative specifier")
        if not isinstance(text, str):
            raise OptionError(f"options.modules[{spec!r}] must be source text")
    globals_ = _mapping(opts, "globals")
    for name in globals_:
        if not isinstance(name, str) or not _IDENT.match(name) or name in _RESERVED:
            raise OptionError(f"options.globals key {name!r} is not a usable identifier")
        if name.startswith("$__"):
            raise OptionError(f"options.globals key {name!r} uses the runtime's reserved prefix")
    execute = _execute(opts.get("execute"), encoder)
    memory = _memory(opts.get("memoryLimitBytes"), default_memory_limit, memory_ceiling)
    report = opts.get("report")
    if report is not None and not callable(report):
        raise OptionError("options.report must be a callable that receives each report")
    cpu = opts.get("cpuTimeLimitMs", default_cpu_time_limit_ms)
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int | float) or cpu <= 0):
        raise OptionError("options.cpuTimeLimitMs must be a positive number of milliseconds")
    job: Job = {
        "source": source,
        "filename": filename,
        "language": language,
        "modules": dict(modules),
        "importNames": import_names,
        "imports": encoded_imports,
        "globals": _encode(encoder, dict(globals_), "options.globals"),
        "globalNames": list(globals_),
        "execute": execute,
        "memoryLimitBytes": memory,
    }
    return Prepared(job=job, encoder=encoder, report=report, cpu_time_limit_ms=cpu)


def _mapping(opts: dict[str, Any], key: str) -> Mapping[Any, Any]:
    value = opts.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(f"options.{key} must be an object")
    return value


def _encode(encoder: Encoder, value: Any, where: str) -> Any:
    try:
        return encoder.encode(value)
    except SerializationError as exc:
        raise OptionError(f"{where}: {exc}") from None


def _execute(value: Any, encoder: Encoder) -> ExecuteSpec:
    if value is None:
        return {"fn": "default", "args": ["A"]}
    if not isinstance(value, Mapping):
        raise OptionError("options.execute must be an object {fn, args}")
    extra = [k for k in value if k not in ("fn", "args")]
    if extra:
        raise OptionError(f"unknown option 'execute.{extra[0]}'")
    fn = value.get("fn", "default")
    if not isinstance(fn, str) or not fn:
        raise OptionError("options.execute.fn must be a non-empty export name")
    args = value.get("args", [])
    if not isinstance(args, list | tuple):
        raise OptionError("options.execute.args must be an array")
    return {"fn": fn, "args": _encode(encoder, list(args), "options.execute.args")}


def _memory(value: Any, default: int, ceiling: int) -> int:
    if value is None:
        return min(default, ceiling)
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError("options.memoryLimitBytes must be an integer number of bytes")
    if value < MIN_MEMORY_LIMIT_BYTES:
        raise OptionError(
            f"options.memoryLimitBytes {value} is below the minimum of {MIN_MEMORY_LIMIT_BYTES}"
        )
    if value > ceiling:
        # §13.4 (b): refuse rather than clamp, so a caller never silently gets less memory.
        raise OptionError(
            f"options.memoryLimitBytes {value} exceeds this runtime's ceiling of {ceiling} bytes"
        )
    return value
