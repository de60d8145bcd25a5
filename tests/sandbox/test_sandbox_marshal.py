"""Runtime §13.3 value marshaling, both ways, and the Python type of each JS type."""

from __future__ import annotations

import array
import asyncio
import math
from datetime import UTC, datetime

from sandbox_support import error_of

from weft.activities.sandbox import CodeExecution, JSMap, SandboxFunction, SandboxPool, run_code


async def test_js_values_become_documented_python_types(pool: SandboxPool) -> None:
    """Each JS type maps to the Python type documented in docs/run-code.md."""
    source = """
        export default {
          s: 'x', n: 1.5, i: 7, t: true, nul: null, u: undefined, big: 2n ** 70n,
          nan: NaN, inf: -Infinity, negzero: -0, arr: [1, [2]], date: new Date(0),
          map: new Map([['a', 1], [2, 'b']]), set: new Set([1, 'two']),
          bytes: new Uint8Array([1, 2]), f64: new Float64Array([0.5]),
          buf: new Uint8Array([9]).buffer,
        };
    """
    r = (await run_code(source, pool=pool)).result
    assert (r["s"], r["n"], r["i"], r["t"], r["nul"], r["u"]) == ("x", 1.5, 7, True, None, None)
    assert r["big"] == 2**70
    assert math.isnan(r["nan"]) and r["inf"] == -math.inf
    assert math.copysign(1, r["negzero"]) == -1
    assert r["arr"] == [1, [2]]
    assert r["date"] == datetime(1970, 1, 1, tzinfo=UTC)
    assert isinstance(r["map"], JSMap) and r["map"] == {"a": 1, 2: "b"}
    assert r["set"] == {1, "two"}
    assert r["bytes"] == b"\x01\x02"
    assert r["f64"] == array.array("d", [0.5])
    assert r["buf"] == bytearray(b"\x09")


async def test_python_values_become_js_values(pool: SandboxPool) -> None:
    """Python values arrive as the matching JS types inside the sandbox."""
    source = """
        export default (v: any) => [typeof v.big, v.date instanceof Date, v.date.getTime(),
          v.map instanceof Map, v.map.get(1), v.set instanceof Set, v.set.has('a'),
          v.bytes instanceof Uint8Array, v.bytes[1], v.ints instanceof Int32Array,
          Array.isArray(v.tuple), Object.is(v.nz, -0), Number.isNaN(v.nan)];
    """
    value = {
        "big": 2**64,
        "date": datetime(2020, 1, 1, tzinfo=UTC),
        "map": JSMap({1: "one"}),
        "set": {"a"},
        "bytes": b"\x00\x05",
        "ints": array.array("i", [1, 2]),
        "tuple": (1, 2),
        "nz": -0.0,
        "nan": math.nan,
    }
    result = await run_code(source, {"execute": {"fn": "default", "args": [value]}}, pool=pool)
    assert result.result == [
        "bigint", True, 1577836800000, True, "one", True, True, True, 5, True, True, True, True
    ]  # fmt: skip


async def test_host_functions_are_callable_proxies(pool: SandboxPool) -> None:
    """A host function is called with copied args; sync results return directly."""
    seen: list[object] = []

    def record(value: object) -> dict[str, object]:
        seen.append(value)
        return {"echo": value}

    source = "import { record } from 'host'; const o = { a: [1] }; export default record(o);"
    result = await run_code(source, {"imports": {"host": {"record": record}}}, pool=pool)
    assert result.result == {"echo": {"a": [1]}}
    assert seen == [{"a": [1]}]


async def test_async_host_functions_return_promises(pool: SandboxPool) -> None:
    """A coroutine result is awaited on the host and arrives as a Promise."""

    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    source = "export default async () => { const p = fetch(21); return [p instanceof Promise, await p]; }"
    result = await run_code(source, {"globals": {"fetch": fetch}}, pool=pool)
    assert result.result == [True, 42]


async def test_host_exceptions_become_sandbox_errors(pool: SandboxPool) -> None:
    """A host exception is catchable in the sandbox as an error with name and message."""

    def fail() -> None:
        raise ValueError("nope")

    source = "try { fail(); } catch (e: any) { var out = [e.name, e.message]; } export default out;"
    result = await run_code(source, {"globals": {"fail": fail}}, pool=pool)
    assert result.result == ["ValueError", "nope"]


async def test_sandbox_callbacks_are_callable_from_the_host(pool: SandboxPool) -> None:
    """A sandbox function passed to the host is a SandboxFunction the host can await."""

    async def apply(fn: SandboxFunction, value: int) -> int:
        assert isinstance(fn, SandboxFunction)
        first: int = await fn(value)
        second: int = await fn(value)
        return first + second

    source = "export default await apply((x: number) => x * 10, 2);"
    result = await run_code(source, {"globals": {"apply": apply}}, pool=pool)
    assert (result.status, result.result) == ("success", 40)


async def test_host_functions_do_not_expose_this(pool: SandboxPool) -> None:
    """A bridged function ignores the sandbox's `this` and exposes only its arguments."""

    class Secret:
        token = "s3cret"

        def peek(self, *args: object) -> int:
            return len(args)

    source = "export default [f.call({ x: 1 }, 1, 2), Object.keys(f), typeof f.token, typeof f.__self__];"
    result = await run_code(source, {"globals": {"f": Secret().peek}}, pool=pool)
    assert result.result == [2, [], "undefined", "undefined"]


async def test_non_transferable_values_raise_serialization_error(pool: SandboxPool) -> None:
    """Class instances, symbols, cycles and result functions settle a SerializationError."""
    for expr in ["new (class A {})()", "Symbol('s')", "(() => { const a: any = {}; a.a = a; return a; })()",
                 "() => () => 1", "new WeakMap()"]:  # fmt: skip
        result = await run_code(f"export default {expr};", pool=pool)
        assert (result.status, error_of(result).name) == ("error", "SerializationError"), expr


async def test_non_transferable_host_values_are_rejected(pool: SandboxPool) -> None:
    """A host value that cannot cross (an arbitrary object) settles link_error naming it."""

    class Opaque:
        pass

    result = await run_code("export default 1", {"globals": {"o": Opaque()}}, pool=pool)
    assert result.status == "link_error"
    assert "Opaque" in error_of(result).message and "options.globals" in error_of(result).message


async def test_reports_are_live_and_reach_the_listener(pool: SandboxPool) -> None:
    """report() appends to the live reports list while the code runs, and calls options.report."""
    heard: list[object] = []
    snapshots: list[int] = []
    handle: CodeExecution | None = None

    def peek() -> None:
        assert handle is not None
        snapshots.append(len(handle.reports))

    handle = run_code(
        "report({ step: 1 }); report('two'); peek(); export default 'done';",
        {"report": heard.append, "globals": {"peek": peek}},
        pool=pool,
    )
    result = await handle
    assert snapshots == [2]
    assert result.reports == [{"step": 1}, "two"] == heard == handle.reports
