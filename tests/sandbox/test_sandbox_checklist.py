"""Runtime §13.9 conformance checklist, one or more tests per item."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sandbox_support import error_of

from weft.activities.sandbox import CodeExecution, CodeExecutionResult, JSMap, SandboxPool, run_code


async def test_run_code_returns_an_awaitable_handle(pool: SandboxPool) -> None:
    """Item 1: run_code returns a CodeExecution handle with running, reports and terminate."""
    handle = run_code("export default 1", pool=pool)
    assert isinstance(handle, CodeExecution)
    assert handle.running is True
    assert handle.reports == []
    result = await handle
    assert isinstance(result, CodeExecutionResult)
    assert (result.status, result.result, handle.running) == ("success", 1, False)


async def test_typescript_is_the_default_language_and_runs_as_a_module(pool: SandboxPool) -> None:
    """Item 2: TypeScript source runs by default, as an ES module with strict semantics."""
    source = """
        interface Point { x: number; y: number }
        const p: Point = { x: 1, y: 2 };
        export default function sum(this: void, q: Point = p): number { return q.x + q.y; }
        export const strict = (function () { return this === undefined; })();
    """
    result = await run_code(source, pool=pool)
    assert (result.status, result.result) == ("success", 3)
    strict = await run_code(source, {"execute": {"fn": "strict"}}, pool=pool)
    assert strict.result is True


async def test_bare_imports_resolve_only_from_imports(pool: SandboxPool) -> None:
    """Item 3: a bare specifier resolves from options.imports and nowhere else."""
    ok = await run_code(
        "import lib, { twice } from 'lib'; export default lib + twice(2);",
        {"imports": {"lib": {"default": 10, "twice": lambda n: n * 2}}},
        pool=pool,
    )
    assert (ok.status, ok.result) == ("success", 14)
    missing = await run_code("import fs from 'fs'; export default 1", pool=pool)
    assert missing.status == "link_error"
    assert "'fs'" in error_of(missing).message and "options.imports" in error_of(missing).message


async def test_relative_imports_resolve_only_from_modules(pool: SandboxPool) -> None:
    """Item 3: a relative specifier resolves from options.modules, with re-exports and stars."""
    modules = {
        "./util.ts": "export const inc = (n: number): number => n + 1;",
        "./index.ts": "export * from './util'; export { inc as plus } from './util.ts';",
    }
    ok = await run_code(
        "import { inc, plus } from './index.js'; export default inc(1) + plus(2);",
        {"modules": modules},
        pool=pool,
    )
    assert (ok.status, ok.result) == ("success", 5)
    missing = await run_code("import x from './nope'; export default x", pool=pool)
    assert missing.status == "link_error"
    assert "options.modules" in error_of(missing).message


async def test_url_and_unknown_specifiers_fail_linkage(pool: SandboxPool) -> None:
    """Item 3: URL specifiers settle link_error, statically and as dynamic imports."""
    static = await run_code(
        "import x from 'https://evil.example/x.js'; export default x", pool=pool
    )
    assert static.status == "link_error"
    dynamic = await run_code("export default await import('https://evil.example/x.js')", pool=pool)
    assert dynamic.status == "link_error"
    computed = await run_code(
        "const u = ['https:', '', 'evil.example'].join('/');\n"
        "try { await import(u); } catch {}\nexport default 'swallowed'",
        pool=pool,
    )
    assert computed.status == "link_error"
    assert "URL imports are not allowed" in error_of(computed).message


async def test_relative_dynamic_import_resolves_from_modules(pool: SandboxPool) -> None:
    """Item 6: a relative dynamic import may resolve, when the target is in options.modules."""
    result = await run_code(
        "const name = './b'; const m = await import(name); export default m.b * 2;",
        {"modules": {"./b.ts": "export const b = 21;"}},
        pool=pool,
    )
    assert (result.status, result.result) == ("success", 42)


async def test_globals_are_module_scoped_not_on_global_this(pool: SandboxPool) -> None:
    """Item 4: options.globals bind at module scope, invisible on globalThis and its keys."""
    source = """
        export default [answer, typeof globalThis.answer, Object.keys(globalThis).length,
                        'answer' in globalThis];
    """
    result = await run_code(source, {"globals": {"answer": 42}}, pool=pool)
    assert (result.status, result.result) == ("success", [42, "undefined", 0, False])


async def test_global_this_holds_only_ecmascript_intrinsics(pool: SandboxPool) -> None:
    """Item 5: no host APIs (fetch, setTimeout, console, process, require) on globalThis."""
    source = """
        export default ['fetch', 'setTimeout', 'setInterval', 'console', 'process', 'require',
          'print', 'std', 'os', 'InternalError', '__date_clock']
          .filter((name) => name in globalThis);
    """
    result = await run_code(source, pool=pool)
    assert (result.status, result.result) == ("success", [])


async def test_eval_function_sab_and_atomics_are_rejected(pool: SandboxPool) -> None:
    """Item 6: eval, new Function, SharedArrayBuffer and Atomics are unavailable."""
    cases = {
        "eval('1 + 1')": "EvalError",
        "(0, eval)('1')": "EvalError",
        "new Function('return 1')()": "EvalError",
        "(function () {}).constructor('return 1')()": "EvalError",
        "(async function () {}).constructor('return 1')": "EvalError",
        "(function* () {}).constructor('yield 1')": "EvalError",
        "(async function* () {}).constructor('yield 1')": "EvalError",
        "new SharedArrayBuffer(8)": "ReferenceError",
        "Atomics.add": "ReferenceError",
    }
    for expr, name in cases.items():
        result = await run_code(f"export default {expr};", pool=pool)
        assert (result.status, error_of(result).name) == ("error", name), expr


async def test_memory_limit_overrun_settles_memory(pool: SandboxPool) -> None:
    """Item 7: exceeding memoryLimitBytes settles with status memory naming the limit."""
    result = await run_code(
        "const a: string[] = []; while (true) a.push('x'.repeat(1024) + a.length);",
        {"memoryLimitBytes": 8 * 1024 * 1024},
        pool=pool,
    )
    assert result.status == "memory"
    assert str(8 * 1024 * 1024) in error_of(result).message


async def test_memory_limit_above_ceiling_is_rejected(pool: SandboxPool) -> None:
    """Item 7 / §13.4 (b): a limit above the ceiling settles link_error naming the cap."""
    result = await run_code("export default 1", {"memoryLimitBytes": 1 << 40}, pool=pool)
    assert result.status == "link_error"
    assert (
        "ceiling" in error_of(result).message
        and str(pool.memory_ceiling_bytes) in error_of(result).message
    )


async def test_terminate_settles_a_tight_loop(pool: SandboxPool) -> None:
    """Item 8: terminate() settles a pure synchronous while(true) with status terminated."""
    handle = run_code("while (true) {}", pool=pool)
    await asyncio.sleep(0.05)
    handle.terminate("enough")
    result = await handle
    assert (result.status, error_of(result).name, error_of(result).message) == (
        "terminated",
        "Terminated",
        "enough",
    )
    assert handle.running is False


async def test_terminate_is_idempotent(pool: SandboxPool) -> None:
    """Item 8: later terminate() calls are no-ops and keep the first reason."""
    handle = run_code("while (true) {}", pool=pool)
    handle.terminate("first")
    handle.terminate("second")
    result = await handle
    handle.terminate("third")
    assert error_of(result).message == "first"
    done = run_code("export default 1", pool=pool)
    first = await done
    done.terminate("late")
    assert (await done) is first and first.status == "success"


async def test_values_cross_by_copy_with_no_shared_references(pool: SandboxPool) -> None:
    """Item 9: host objects are deep-copied in, and sandbox mutations never reach the host."""
    config = {"items": [1, 2], "nested": {"k": "v"}}
    # Globals, not imports: imports are frozen (see the next tests), globals are writable.
    result = await run_code(
        "cfg.items.push(3); cfg.nested.k = 'changed'; export default cfg;",
        {"globals": {"cfg": config}},
        pool=pool,
    )
    assert result.result == {"items": [1, 2, 3], "nested": {"k": "changed"}}
    assert config == {"items": [1, 2], "nested": {"k": "v"}}


async def test_import_namespace_is_frozen(pool: SandboxPool) -> None:
    """Item 9 / §13.2: a synthetic module's namespace is a frozen copy."""
    result = await run_code(
        "import * as ns from 'lib'; export default [Object.isFrozen(ns), ns.a];",
        {"imports": {"lib": {"a": 1}}},
        pool=pool,
    )
    assert result.result == [True, 1]


async def test_a_write_to_an_imported_object_throws(pool: SandboxPool) -> None:
    """§13.2: an imported object is a frozen copy, so assigning to it throws a TypeError."""
    result = await run_code(
        "import cfg from 'cfg'; cfg.a = 9; export default cfg;",
        {"imports": {"cfg": {"default": {"a": 1}}}},
        pool=pool,
    )
    assert (result.status, error_of(result).name) == ("error", "TypeError")


async def test_imported_values_are_frozen_all_the_way_down(pool: SandboxPool) -> None:
    """§13.2: nested objects, arrays and Map entries of an import are frozen too."""
    source = """
        import cfg, { more } from 'cfg';
        const attempt = (write: () => unknown): string => {
            try { write(); return "written"; } catch (e) { return (e as Error).name; }
        };
        export default [
            attempt(() => { (cfg as any).a = 9; }),
            attempt(() => { (cfg as any).fresh = 1; }),
            attempt(() => { cfg.nested.x = 1; }),
            attempt(() => { cfg.nested.deeper.y = 2; }),
            attempt(() => cfg.list.push(1)),
            attempt(() => { cfg.list[0].z = 3; }),
            attempt(() => { more.byKey.get("k").v = 4; }),
            cfg.blob[1],
            cfg,
        ];
    """
    config = {
        "a": 1,
        "nested": {"x": 0, "deeper": {"y": 0}},
        "list": [{"z": 0}],
        "blob": b"\x01\x02",
    }
    result = await run_code(
        source,
        {"imports": {"cfg": {"default": config, "more": {"byKey": JSMap(k={"v": 0})}}}},
        pool=pool,
    )
    assert result.status == "success", result.error
    assert result.result[:8] == ["TypeError"] * 7 + [2]
    assert result.result[8] == config


async def test_the_programs_own_objects_stay_writable(pool: SandboxPool) -> None:
    """Only imports are frozen: the program's objects, and its copies of imports, are writable."""
    source = """
        import cfg from 'cfg';
        const own = { n: 1, list: [1] };
        own.n = 2;
        own.list.push(2);
        const copy = { ...cfg, a: 2, list: [...cfg.list, 3] };
        copy.extra = true;
        export default [own, copy, Object.isFrozen(cfg), Object.isFrozen(own)];
    """
    result = await run_code(
        source, {"imports": {"cfg": {"default": {"a": 1, "list": [1]}}}}, pool=pool
    )
    assert result.result == [
        {"n": 2, "list": [1, 2]},
        {"a": 2, "list": [1, 3], "extra": True},
        True,
        False,
    ]


async def test_result_statuses_are_exactly_the_spec_codes(pool: SandboxPool) -> None:
    """Item 11: each status code of the spec is produced, and serialized as camelCase JSON."""
    seen = {
        (await run_code("export default 1", pool=pool)).status,
        (await run_code("throw new Error('x')", pool=pool)).status,
        (await run_code("let = ;", pool=pool)).status,
        (await run_code("const a = []; for (;;) a.push(new Array(1e5))", pool=pool)).status,
    }
    handle = run_code("for (;;) {}", pool=pool)
    handle.terminate()
    seen.add((await handle).status)
    assert seen == {"success", "error", "link_error", "memory", "terminated"}
    dumped = (await run_code("export default 1", pool=pool)).model_dump(by_alias=True)
    assert set(dumped) == {"status", "result", "error", "reports", "logs", "durationMs"}


async def test_each_call_gets_a_fresh_isolate(pool: SandboxPool) -> None:
    """Item 12: globals, intrinsic changes and module state never leak between calls."""
    await run_code(
        "globalThis.leak = 1; Object.prototype.polluted = true; Array.prototype.push = null;"
        "export let counter = 1;",
        pool=pool,
    )
    for _ in range(3):  # enough calls to land on every warm worker
        result = await run_code(
            "export default [typeof globalThis.leak, ({}).polluted, typeof [].push];", pool=pool
        )
        assert result.result == ["undefined", None, "function"]


async def test_console_is_captured_into_logs(pool: SandboxPool) -> None:
    """SHOULD: console.* calls land in logs with level, args and timestamp."""
    result = await run_code(
        "console.log('a', 1, {b: [2n]}); console.warn('w'); console.error(new Error('e'));"
        "console.info('i'); console.debug('d'); export default typeof globalThis.console;",
        pool=pool,
    )
    assert result.result == "undefined"
    assert [log.level for log in result.logs] == ["log", "warn", "error", "info", "debug"]
    assert result.logs[0].args == ["a", 1, {"b": [2]}]
    assert result.logs[2].args == ["Error: e"]
    assert all(log.timestamp > 0 for log in result.logs)


async def test_a_console_global_replaces_the_capture(pool: SandboxPool) -> None:
    """SHOULD: when the caller supplies a console global, it receives the calls instead."""
    lines: list[str] = []
    result = await run_code(
        "console.log('to host'); export default 1",
        {"globals": {"console": {"log": lambda *a: lines.append(" ".join(map(str, a)))}}},
        pool=pool,
    )
    assert (result.status, result.logs, lines) == ("success", [], ["to host"])


async def test_errors_point_at_the_callers_source(pool: SandboxPool) -> None:
    """SHOULD: syntax, link and runtime errors carry line/column in the caller's source."""
    syntax = await run_code("const a: number = 1;\nconst b = (;\n", pool=pool)
    assert (syntax.status, error_of(syntax).line, error_of(syntax).column) == ("link_error", 2, 9)
    link = await run_code(
        "\n\n  import { nope } from 'lib';\n", {"imports": {"lib": {}}}, pool=pool
    )
    assert (link.status, error_of(link).line, error_of(link).column) == ("link_error", 3, 12)
    runtime = await run_code(
        "type T = { a: number };\nexport default function f(x: T) {\n  return (null as any).a;\n}",
        pool=pool,
    )
    assert (runtime.status, error_of(runtime).name, error_of(runtime).line) == (
        "error",
        "TypeError",
        3,
    )
    assert "sandbox:main.ts:3" in (error_of(runtime).stack or "")


async def test_abort_event_terminates_the_run(pool: SandboxPool) -> None:
    """SHOULD: when the execution's abort signal fires, the handle is terminated."""
    abort = asyncio.Event()
    handle = run_code("while (true) {}", pool=pool, abort=abort)
    abort.set()
    result = await handle
    assert (result.status, error_of(result).name) == ("terminated", "Terminated")


async def test_abort_registration_callback_terminates_the_run(pool: SandboxPool) -> None:
    """SHOULD: a callback-registration abort hook terminates the handle when called."""
    callbacks: list[Callable[[], object]] = []
    handle = run_code("while (true) {}", pool=pool, abort=callbacks.append)
    callbacks[0]()
    assert (await handle).status == "terminated"
