"""Host-side value marshaling across the sandbox boundary (Runtime §13.3).

Values travel as a tagged JSON tree: JSON primitives stand for themselves, every other value
is a list whose first item is a tag (see `_runtime.js` for the sandbox half). Decoding treats
the tree as hostile input: anything malformed raises `SerializationError`.
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1

# JS typed array name <-> Python array typecode (Uint8Array itself maps to `bytes`).
_TYPECODES = {
    "Int8Array": "b",
    "Uint8ClampedArray": "B",
    "Int16Array": "h",
    "Uint16Array": "H",
    "Int32Array": "i",
    "Uint32Array": "I",
    "Float32Array": "f",
    "Float64Array": "d",
    "BigInt64Array": "q",
    "BigUint64Array": "Q",
}
_ARRAY_NAMES = {code: name for name, code in _TYPECODES.items() if name != "Uint8ClampedArray"}
_ARRAY_NAMES["B"] = "Uint8Array"


class SerializationError(TypeError):
    """A value cannot cross the sandbox boundary (class instance, symbol, cycle, ...)."""


class JSMap(dict):  # type: ignore[type-arg]
    """A JS `Map` on the host side: a dict that goes back into the sandbox as a `Map`."""


class SandboxFunction:
    """A sandbox function seen from the host: `await fn(*args)` calls it inside the sandbox.

    It can run only while the sandbox is suspended in a host call (the only moment the
    sandbox is not executing JS); afterwards calling it raises `RuntimeError`.
    """

    def __init__(self, fn_id: int, invoke: Callable[[int, list[Any]], Any]) -> None:
        self._id = fn_id
        self._invoke = invoke

    async def __call__(self, *args: Any) -> Any:
        return await self._invoke(self._id, list(args))

    def __repr__(self) -> str:
        return f"<SandboxFunction #{self._id}>"


class Encoder:
    """Encodes host values for the sandbox, giving each host callable a per-call id."""

    def __init__(self) -> None:
        self.functions: list[Callable[..., Any]] = []
        self._ids: dict[int, int] = {}

    def encode(self, value: Any) -> Any:
        return self._enc(value, set())

    def _enc(self, v: Any, seen: set[int]) -> Any:
        if v is None or isinstance(v, (str, bool)):
            return v
        if isinstance(v, int):
            return v if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER else ["b", str(v)]
        if isinstance(v, float):
            if math.isnan(v):
                return ["n", "NaN"]
            if math.isinf(v):
                return ["n", "Infinity" if v > 0 else "-Infinity"]
            return ["n", "-0"] if v == 0 and math.copysign(1, v) < 0 else v
        if isinstance(v, SandboxFunction):
            return ["f", v._id]
        if isinstance(v, datetime):
            aware = v if v.tzinfo else v.replace(tzinfo=UTC)
            return ["D", aware.timestamp() * 1000]
        if isinstance(v, bytes):
            return ["T", "Uint8Array", list(v)]
        if isinstance(v, bytearray):
            return ["B", list(v)]
        if isinstance(v, array.array):
            if v.typecode not in _ARRAY_NAMES:
                raise SerializationError(f"array.array typecode {v.typecode!r} has no typed array")
            return ["T", _ARRAY_NAMES[v.typecode], list(v.tobytes())]
        if callable(v) and not isinstance(v, type):
            return self._function(v)
        if id(v) in seen:
            raise SerializationError("a cyclic structure cannot cross the sandbox boundary")
        seen.add(id(v))
        try:
            return self._container(v, seen)
        finally:
            seen.discard(id(v))

    def _container(self, v: Any, seen: set[int]) -> Any:
        if isinstance(v, JSMap):
            return ["M", *([self._enc(k, seen), self._enc(x, seen)] for k, x in v.items())]
        if isinstance(v, Mapping):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise SerializationError(
                        f"dict key {k!r} is not a string; use JSMap for a JS Map"
                    )
                out[k] = self._enc(x, seen)
            return ["O", out]
        if isinstance(v, (list, tuple)):
            return ["A", *(self._enc(x, seen) for x in v)]
        if isinstance(v, (set, frozenset)):
            return ["S", *(self._enc(x, seen) for x in v)]
        raise SerializationError(f"a {type(v).__name__} instance cannot cross the sandbox boundary")

    def _function(self, fn: Callable[..., Any]) -> list[Any]:
        key = id(fn)
        if key not in self._ids:
            self._ids[key] = len(self.functions)
            self.functions.append(fn)
        return ["F", self._ids[key], getattr(fn, "__name__", "")]


def decode(
    tree: Any,
    *,
    host_functions: list[Callable[..., Any]] | None = None,
    invoke: Callable[[int, list[Any]], Any] | None = None,
) -> Any:
    """Decode a tagged tree from the sandbox into host values."""

    def dec(t: Any) -> Any:
        if t is None or isinstance(t, (str, bool, int, float)):
            return t
        if isinstance(t, dict) or not t or not isinstance(t[0], str):
            raise SerializationError("malformed value from the sandbox")
        tag = t[0]
        try:
            return _DECODERS[tag](t, dec, host_functions, invoke)
        except KeyError:
            raise SerializationError(f"unknown value tag {tag!r} from the sandbox") from None
        except (TypeError, ValueError, IndexError, OverflowError, AttributeError, OSError) as exc:
            if isinstance(exc, SerializationError):
                raise
            raise SerializationError(f"malformed {tag!r} value from the sandbox: {exc}") from None

    try:
        return dec(tree)
    except RecursionError:
        raise SerializationError("a value nested too deeply cannot cross the boundary") from None


def _hashable(value: Any, what: str) -> Any:
    try:
        hash(value)
    except TypeError:
        raise SerializationError(
            f"a {what} holding a {type(value).__name__} cannot become a Python value"
        ) from None
    return value


def _typed(t: list[Any], *_: Any) -> Any:
    raw = bytes(t[2])
    if t[1] == "Uint8Array":
        return raw
    out = array.array(_TYPECODES[t[1]])
    out.frombytes(raw)
    return out


def _sandbox_fn(t: list[Any], _dec: Any, _host: Any, invoke: Any) -> Any:
    if invoke is None:
        raise SerializationError("a function cannot leave the sandbox once it settles")
    return SandboxFunction(int(t[1]), invoke)


def _host_fn(t: list[Any], _dec: Any, host: Any, _invoke: Any) -> Any:
    index = int(t[1])
    if host is None or not 0 <= index < len(host):
        raise SerializationError("unknown host function reference")
    return host[index]


_DECODERS: dict[str, Callable[..., Any]] = {
    "u": lambda t, *_: None,
    "n": lambda t, *_: float(t[1]),
    "b": lambda t, *_: int(t[1]),
    "A": lambda t, dec, *_: [dec(x) for x in t[1:]],
    "O": lambda t, dec, *_: {str(k): dec(x) for k, x in t[1].items()},
    "M": lambda t, dec, *_: JSMap((_hashable(dec(k), "Map"), dec(x)) for k, x in t[1:]),
    "S": lambda t, dec, *_: {_hashable(dec(x), "Set") for x in t[1:]},
    "D": lambda t, *_: datetime.fromtimestamp(t[1] / 1000, UTC),
    "B": lambda t, *_: bytearray(t[1]),
    "T": _typed,
    "f": _sandbox_fn,
    "F": _host_fn,
}


def to_jsonable(value: Any) -> Any:
    """A JSON-safe rendering of a decoded value, for the CLI and the Temporal activity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, array.array):
        return value.tolist()
    if isinstance(value, JSMap):
        if all(isinstance(k, str) for k in value):
            return {k: to_jsonable(v) for k, v in value.items()}
        return [[to_jsonable(k), to_jsonable(v)] for k, v in value.items()]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (SandboxFunction,)) or callable(value):
        return None
    return value
