"""Runtime §13.6 type erasure: types go, positions stay, non-erasable syntax is a link error."""

from __future__ import annotations

from sandbox_support import error_of

from weft.activities.sandbox import SandboxPool, run_code
from weft.activities.sandbox._erase import erase_types, parse


def test_erasure_keeps_every_line_and_column() -> None:
    """Blanking leaves the code's length and newlines exactly as written."""
    source = b"const a: Map<string,\n  number> = new Map();\nlet b = a as unknown as number;\n"
    erased = erase_types(source, parse(source))
    assert len(erased) == len(source)
    assert [len(x) for x in erased.split(b"\n")] == [len(x) for x in source.split(b"\n")]
    assert erased.split(b"\n")[2].replace(b" ", b"") == b"letb=a;"


async def test_common_typescript_syntax_runs(pool: SandboxPool) -> None:
    """Interfaces, generics, modifiers, assertions, overloads and type-only imports erase."""
    source = """
        import type { Thing } from './types';
        import { type Other, value } from './types';
        export type Id = string | number;
        interface Box<T> { value: T }
        declare const ambient: number;
        function first<T>(xs: T[]): T;
        function first(xs: any[]) { return xs[0]; }
        abstract class Base { abstract name(): string; protected readonly tag?: string = 't'; }
        class Impl extends Base implements Box<number> {
          public value!: number;
          declare extra: string;
          override name(): string { return 'impl'; }
        }
        const impl = new Impl();
        impl.value = first<number>([value!, 2]) satisfies number;
        const n = <number>(impl.value as unknown);
        const pick = <K extends keyof Box<number>,>(k: K): K => k;
        export default [impl.name(), n, pick('value')];
    """
    modules = {"./types.ts": "export interface Thing {}; export const value: number = 1;"}
    result = await run_code(source, {"modules": modules}, pool=pool)
    assert (result.status, result.result) == ("success", ["impl", 1, "value"])


async def test_enums_are_a_link_error_with_position(pool: SandboxPool) -> None:
    """An enum cannot be erased: link_error with line and column in the caller's source."""
    result = await run_code("const x = 1;\n  enum Color { Red }\n", pool=pool)
    assert (result.status, error_of(result).name) == ("link_error", "TypeScriptError")
    assert (error_of(result).line, error_of(result).column) == (2, 3)


async def test_parameter_properties_are_a_link_error(pool: SandboxPool) -> None:
    """Constructor parameter properties have runtime semantics, so they are rejected."""
    result = await run_code("class A { constructor(private x: number) {} }", pool=pool)
    assert result.status == "link_error"
    assert "parameter properties" in error_of(result).message


async def test_no_type_checking_happens(pool: SandboxPool) -> None:
    """Type errors are not reported: only erasure runs, never a type checker."""
    result = await run_code(
        "const n: number = 'not a number' as any as string; export default n;", pool=pool
    )
    assert (result.status, result.result) == ("success", "not a number")


async def test_syntax_error_in_a_module_names_that_module(pool: SandboxPool) -> None:
    """A syntax error in options.modules is a link_error naming the module and position."""
    result = await run_code(
        "import { a } from './bad';", {"modules": {"./bad.ts": "export const a = ;"}}, pool=pool
    )
    assert result.status == "link_error"
    assert "./bad.ts:1:" in error_of(result).message


async def test_import_require_is_a_clear_link_error_in_both_languages(pool: SandboxPool) -> None:
    """`import x = require(...)` is a link_error naming the construct and line, never internal."""
    for language, name in [("javascript", "LinkError"), ("typescript", "TypeScriptError")]:
        for source in ['const a = 1;\nimport x = require("y");', 'import type x = require("y");']:
            result = await run_code(source, {"language": language}, pool=pool)
            assert (result.status, error_of(result).name) == ("link_error", name), (
                language,
                source,
            )
            assert "`import x = require(...)` is not supported" in error_of(result).message
            assert error_of(result).line == source.count("\n") + 1
