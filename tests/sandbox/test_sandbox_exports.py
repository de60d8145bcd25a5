"""Runtime §13.5 configured export resolution, one test per branch, plus top-level await."""

from __future__ import annotations

from sandbox_support import error_of

from weft.activities.sandbox import SandboxPool, run_code


async def test_default_export_value_is_the_result(pool: SandboxPool) -> None:
    """Step 1/4: without execute, the default export is read and marshalled."""
    result = await run_code("export default { ok: true };", pool=pool)
    assert (result.status, result.result) == ("success", {"ok": True})


async def test_named_function_export_is_called_with_args(pool: SandboxPool) -> None:
    """Step 2: a function export is called with execute.args inside the sandbox."""
    result = await run_code(
        "export function add(a: number, b: number) { return a + b; }",
        {"execute": {"fn": "add", "args": [2, 3]}},
        pool=pool,
    )
    assert (result.status, result.result) == ("success", 5)


async def test_thenables_are_awaited_repeatedly(pool: SandboxPool) -> None:
    """Step 3: promises and custom thenables are awaited until a plain value remains."""
    source = """
        const thenable = (v: unknown) => ({ then(ok: (x: unknown) => void) { ok(v); } });
        export default async () => thenable(Promise.resolve(thenable(7)));
    """
    result = await run_code(source, pool=pool)
    assert (result.status, result.result) == ("success", 7)


async def test_missing_export_is_a_link_error(pool: SandboxPool) -> None:
    """A missing selected export settles link_error."""
    result = await run_code("export const a = 1;", {"execute": {"fn": "main"}}, pool=pool)
    assert result.status == "link_error"
    assert "main" in error_of(result).message


async def test_non_function_export_with_args_is_an_error(pool: SandboxPool) -> None:
    """A non-function export with non-empty args settles error."""
    result = await run_code("export const a = 1;", {"execute": {"fn": "a", "args": [1]}}, pool=pool)
    assert (result.status, error_of(result).name) == ("error", "TypeError")


async def test_non_function_export_without_args_is_the_value(pool: SandboxPool) -> None:
    """A non-function export with no args is itself the candidate value."""
    result = await run_code("export const a = [1, 2];", {"execute": {"fn": "a"}}, pool=pool)
    assert result.result == [1, 2]


async def test_throw_from_the_export_is_an_error(pool: SandboxPool) -> None:
    """An uncaught throw from the selected function settles error with its name and message."""
    result = await run_code(
        "export default function () { throw new RangeError('bad range'); }", pool=pool
    )
    assert (result.status, error_of(result).name, error_of(result).message) == (
        "error",
        "RangeError",
        "bad range",
    )


async def test_rejection_from_the_export_is_an_error(pool: SandboxPool) -> None:
    """A rejection of the returned promise settles error."""
    result = await run_code(
        "export default async () => { await null; throw new TypeError('later'); }", pool=pool
    )
    assert (result.status, error_of(result).message) == ("error", "later")


async def test_thrown_non_error_values_are_reported(pool: SandboxPool) -> None:
    """A thrown string still settles error with a readable message."""
    result = await run_code("throw 'plain string';", pool=pool)
    assert (result.status, error_of(result).message) == ("error", "plain string")


async def test_top_level_await_completes_before_resolution(pool: SandboxPool) -> None:
    """§13.7: top-level await is supported and finishes before the export is read."""
    source = """
        let ready = false;
        await Promise.resolve().then(() => { ready = true; });
        export default () => ready;
    """
    result = await run_code(source, pool=pool)
    assert result.result is True


async def test_microtasks_run_in_order(pool: SandboxPool) -> None:
    """§13.7: the sandbox has its own microtask queue, with queueMicrotask-free promise order."""
    source = """
        const order: number[] = [];
        Promise.resolve().then(() => order.push(2));
        order.push(1);
        await null;
        export default order;
    """
    assert (await run_code(source, pool=pool)).result == [1, 2]


async def test_never_settling_module_reports_a_deadlock(pool: SandboxPool) -> None:
    """A promise that nothing can resolve settles error instead of hanging silently."""
    result = await run_code("await new Promise(() => {}); export default 1", pool=pool)
    assert (result.status, error_of(result).name) == ("error", "DeadlockError")


async def test_import_meta_url_is_synthetic(pool: SandboxPool) -> None:
    """§13.2: import.meta.url is sandbox:<filename>, never a host path."""
    result = await run_code(
        "export default import.meta.url;", {"filename": "agent/task.ts"}, pool=pool
    )
    assert result.result == "sandbox:agent/task.ts"


async def test_javascript_language_skips_erasure(pool: SandboxPool) -> None:
    """language javascript runs plain JS; TS syntax there is a link error."""
    ok = await run_code("export default 2 ** 10;", {"language": "javascript"}, pool=pool)
    assert ok.result == 1024
    bad = await run_code("const a: number = 1;", {"language": "javascript"}, pool=pool)
    assert bad.status == "link_error"


async def test_unknown_option_keys_are_rejected(pool: SandboxPool) -> None:
    """Unknown option keys settle link_error naming the key."""
    result = await run_code("export default 1", {"timeout": 5}, pool=pool)
    assert result.status == "link_error"
    assert "'timeout'" in error_of(result).message


async def test_circular_imports_are_a_link_error(pool: SandboxPool) -> None:
    """Circular imports are reported as link_error naming the cycle."""
    modules = {"./a.ts": "import './b'; export const a = 1;", "./b.ts": "import './a';"}
    result = await run_code(
        "import { a } from './a'; export default a;", {"modules": modules}, pool=pool
    )
    assert result.status == "link_error"
    assert "circular" in error_of(result).message
