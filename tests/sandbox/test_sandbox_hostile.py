"""Hostile inputs: each settles with the right status and leaves the host unharmed."""

from __future__ import annotations

import asyncio
import gc
import resource

from sandbox_support import error_of

from weft.activities.sandbox import SandboxPool, run_code


async def test_prototype_pollution_does_not_reach_host_or_later_calls(pool: SandboxPool) -> None:
    """Mutating intrinsics inside the sandbox changes nothing on the host or in the next call."""
    source = """
        Object.prototype.isAdmin = true;
        Array.prototype.map = () => 'hijacked';
        JSON.stringify = () => '"forged"';
        (Object as any).prototype.__proto__ = null;
        export default { clean: 1 };
    """
    polluted = await run_code(source, pool=pool)
    assert polluted.status in ("success", "error")
    assert not hasattr(object, "isAdmin") and "isAdmin" not in {}
    assert [1, 2] == list(map(int, ["1", "2"]))
    for _ in range(3):
        later = await run_code(
            "export default [({} as any).isAdmin, [1].map((x) => x + 1), JSON.stringify(1)];",
            pool=pool,
        )
        assert later.result == [None, [2], "1"]


async def test_eval_and_function_constructor_settle_error(pool: SandboxPool) -> None:
    """eval and Function via (function(){}).constructor settle error with EvalError."""
    for source in [
        "export default eval('process')",
        "export default (function () {}).constructor('return globalThis')()",
        "export default Reflect.construct((() => {}).constructor, ['return 1'])",
    ]:
        result = await run_code(source, pool=pool)
        assert (result.status, error_of(result).name) == ("error", "EvalError"), source


async def test_url_dynamic_import_settles_link_error(pool: SandboxPool) -> None:
    """import('https://...') settles link_error and never touches the network."""
    result = await run_code("export default await import('https://example.com/x.mjs');", pool=pool)
    assert result.status == "link_error"


async def test_memory_bomb_settles_memory(pool: SandboxPool) -> None:
    """A memory bomb settles memory under the default limit, and the next call still works."""
    bombs = [
        "let s = 'x'; while (true) s += s;",
        "const a: number[][] = []; for (;;) a.push(new Array(1e6).fill(1));",
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, { i });",
    ]
    for bomb in bombs:
        result = await run_code(bomb, {"memoryLimitBytes": 16 * 1024 * 1024}, pool=pool)
        assert result.status == "memory", (bomb, result.error)
    assert (await run_code("export default 'alive'", pool=pool)).result == "alive"


async def test_deep_recursion_settles_error(pool: SandboxPool) -> None:
    """Unbounded recursion settles error (stack overflow), not a host crash."""
    result = await run_code(
        "function f(n: number): number { return f(n + 1) + 1; } f(0);", pool=pool
    )
    assert result.status == "error"
    assert "stack overflow" in error_of(result).message


async def test_deeply_nested_source_settles(pool: SandboxPool) -> None:
    """Deeply nested source and values never exhaust the host's recursion limit."""
    deep = "export default " + "[" * 5000 + "]" * 5000 + ";"
    result = await run_code(deep, pool=pool)
    assert result.status in ("success", "error", "link_error")


async def test_infinite_loop_terminates(pool: SandboxPool) -> None:
    """An infinite loop settles terminated after terminate(); the latency goes to the bench."""
    handle = run_code("for (;;) {}", pool=pool)
    await asyncio.sleep(0.02)
    handle.terminate("deadline")
    result = await handle
    assert (result.status, error_of(result).message) == ("terminated", "deadline")


async def test_cpu_cap_settles_terminated_with_a_clear_message(pool: SandboxPool) -> None:
    """The optional CPU safety cap settles terminated and names the cap."""
    result = await run_code("while (true) {}", {"cpuTimeLimitMs": 50}, pool=pool)
    assert result.status == "terminated"
    assert "cpuTimeLimitMs" in error_of(result).message


async def test_host_call_in_flight_is_cancelled_by_terminate(pool: SandboxPool) -> None:
    """terminate() during a pending host call settles terminated and cancels the host work."""
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    handle = run_code("await slow();", {"globals": {"slow": slow}}, pool=pool)
    await started.wait()
    handle.terminate()
    assert (await handle).status == "terminated"
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_sequential_calls_keep_host_rss_flat(pool: SandboxPool) -> None:
    """1,000 sequential calls leave the host's RSS flat and leak nothing between calls."""

    def rss_kb() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    for _ in range(50):  # warm caches first, so we measure growth, not one-time costs
        await run_code("export default 1", pool=pool)
    gc.collect()
    before = rss_kb()
    for i in range(1000):
        result = await run_code(
            "const seen = (globalThis as any).mark; (globalThis as any).mark = 1;"
            "export default (n: number) => [seen, n];",
            {"execute": {"fn": "default", "args": [i]}},
            pool=pool,
        )
        assert result.result == [None, i]
    gc.collect()
    assert rss_kb() - before < 30 * 1024


async def test_log_flood_is_bounded_on_the_host(pool: SandboxPool) -> None:
    """A flood of console.log calls keeps at most MAX_LOGS entries on the host."""
    from weft.activities.sandbox._handle import MAX_LOGS

    result = await run_code(
        f"for (let i = 0; i < {MAX_LOGS + 500}; i++) console.log(i); export default 1", pool=pool
    )
    assert result.status == "success"
    assert len(result.logs) == MAX_LOGS
