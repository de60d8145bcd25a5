"""Our own ES module linker: rewrite import/export into calls on a per-call runtime (§13.2).

QuickJS as packaged has no module loader, so each module body becomes an async function
(which also gives top-level await). Bare specifiers resolve only from `imports`, relative
ones only from `modules`; anything else fails linkage. Rewrites keep every line in place.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import NoReturn

import tree_sitter

from weft.activities.sandbox._declared import declared_names
from weft.activities.sandbox._erase import (
    IMPORT_REQUIRE_UNSUPPORTED,
    SourceError,
    check_syntax,
    erase_types,
    parse,
    position,
    required_field,
)

RT = "$__w"  # the per-module runtime parameter; `$__` names cannot clash with sane user code
_SUFFIXES = ("", ".ts", ".js", ".mjs", "/index.ts", "/index.js")


@dataclass
class _Module:
    key: str
    mid: str
    code: bytes
    deps: list[str] = field(default_factory=list)
    bindings: list[str] = field(default_factory=list)
    local_exports: dict[str, str] = field(default_factory=dict)  # name -> JS getter expression
    reexports: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (mid, name)
    stars: list[str] = field(default_factory=list)
    wanted: list[tuple[str, str, tuple[int, int]]] = field(default_factory=list)


@dataclass
class Bundle:
    """The linked program: one JS expression and a map from its lines back to modules."""

    text: str
    entry: str
    line_map: list[tuple[int, int, str]]  # (first bundle line, line count, module name)
    exports: dict[str, list[str]]

    def locate(self, bundle_line: int) -> tuple[str, int] | None:
        """Map a 1-based line of the bundle to (module name, line), or None if internal."""
        for first, count, name in self.line_map:
            if first <= bundle_line < first + count:
                return name, bundle_line - first + 1
        return None


def normalize(spec: str) -> str:
    """The key under which a relative specifier or filename is stored."""
    return posixpath.normpath(spec.lstrip("/")) if spec else spec


def is_relative(spec: str) -> bool:
    return spec.startswith(("./", "../", "/")) or spec in (".", "..")


class Linker:
    """Links an entry source against `modules` (source) and `imports` (synthetic) by name."""

    def __init__(
        self,
        *,
        filename: str,
        modules: dict[str, str],
        import_names: dict[str, list[str]],
        typescript: bool,
        params: list[str],
    ) -> None:
        self.filename = filename
        self.params = params
        self.sources = {normalize(k): (k, v) for k, v in modules.items()}
        self.import_names = import_names
        self.typescript = typescript
        self.mids: dict[str, str] = {}

    def resolve(self, importer: str, spec: str) -> str | None:
        """Module id for `spec` imported from module key `importer`, or None."""
        if is_relative(spec):
            base = normalize(posixpath.join(posixpath.dirname(importer), spec))
            stem = (
                base[: -len(posixpath.splitext(base)[1])]
                if base.endswith((".js", ".mjs"))
                else None
            )
            for candidate in [base + s for s in _SUFFIXES] + ([stem + ".ts"] if stem else []):
                if candidate in self.sources:
                    return self.mids.setdefault(candidate, f"m:{candidate}")
            return None
        if ":" in spec:  # https:, node:, file:, data: ... are never resolvable here
            return None
        return f"s:{spec}" if spec in self.import_names else None

    def explain(self, spec: str) -> str:
        if is_relative(spec):
            return f"cannot resolve {spec!r}: relative imports resolve only from options.modules"
        if ":" in spec:
            return f"cannot import {spec!r}: URL imports are not allowed in the sandbox"
        return f"cannot resolve {spec!r}: bare imports resolve only from options.imports"

    def link(self, entry_source: str) -> Bundle:
        entry_key = normalize(self.filename) or "main.ts"
        self.sources.setdefault(entry_key, (self.filename, entry_source))
        self.sources[entry_key] = (self.filename, entry_source)
        self.mids[entry_key] = "m:" + entry_key
        mods = {}
        for key, (name, src) in self.sources.items():
            mid = self.mids.setdefault(key, f"m:{key}")
            try:
                mods[mid] = self._transform(key, mid, src)
            except SourceError as exc:
                exc.module = name
                raise
        exports = self._export_names(mods)
        for mod in mods.values():
            for spec_mid, name, (line, col) in mod.wanted:
                if name not in exports[spec_mid]:
                    err = SourceError(
                        f"module {spec_mid[2:]!r} does not provide an export named {name!r}",
                        line=line,
                        column=col,
                    )
                    err.module = self.sources[mod.key][0]
                    raise err
        self._check_cycles(mods, self.mids[entry_key])
        return self._emit(mods, self.mids[entry_key], exports)

    def _transform(self, key: str, mid: str, source: str) -> _Module:
        code = source.encode()
        tree = parse(code)
        check_syntax(code, tree)
        if self.typescript:
            code = erase_types(code, tree)
            tree = parse(code)
        mod = _Module(key=key, mid=mid, code=code)
        buf = bytearray(code)
        _Rewriter(self, mod, buf).run(tree.root_node)
        mod.code = bytes(buf)
        return mod

    def _export_names(self, mods: dict[str, _Module]) -> dict[str, list[str]]:
        names: dict[str, list[str]] = {f"s:{k}": list(v) for k, v in self.import_names.items()}

        def of(mid: str, seen: frozenset[str]) -> list[str]:
            if mid in names:
                return names[mid]
            mod = mods[mid]
            found = list(mod.local_exports) + list(mod.reexports)
            for star in mod.stars:
                if star not in seen:
                    found += [n for n in of(star, seen | {mid}) if n != "default"]
            result = list(dict.fromkeys(found))
            if not seen:
                names[mid] = result
            return result

        for mid in mods:
            of(mid, frozenset())
        return names

    def _check_cycles(self, mods: dict[str, _Module], entry: str) -> None:
        state: dict[str, int] = {}

        def visit(mid: str, path: list[str]) -> None:
            if state.get(mid) == 2 or mid.startswith("s:"):
                return
            if state.get(mid) == 1:
                cycle = " -> ".join(p[2:] for p in path[path.index(mid) :] + [mid])
                raise SourceError(f"circular imports are not supported: {cycle}", name="LinkError")
            state[mid] = 1
            for dep in mods[mid].deps:
                visit(dep, path + [mid])
            state[mid] = 2

        for mid in mods:
            visit(mid, [])

    def _emit(self, mods: dict[str, _Module], entry: str, exports: dict[str, list[str]]) -> Bundle:
        lines = ['(function ($__rt) {"use strict";']
        line_map: list[tuple[int, int, str]] = []
        for mid, mod in mods.items():
            getters = dict(mod.local_exports)
            for name, (src_mid, src_name) in mod.reexports.items():
                getters[name] = f"{RT}.imp({json.dumps(src_mid)})[{json.dumps(src_name)}]"
            for star in mod.stars:
                for name in exports[star]:
                    if name != "default" and name not in getters:
                        getters[name] = f"{RT}.imp({json.dumps(star)})[{json.dumps(name)}]"
            getter_js = ",".join(f"{json.dumps(n)}:()=>{g}" for n, g in getters.items())
            binds = f"const {','.join(mod.bindings)};" if mod.bindings else ""
            head = (
                f"$__rt.def({json.dumps(mid)},{json.dumps(mod.deps)},"
                f"async function ({','.join([RT, *self.params])}) "
                f"{{{{{RT}.exp({{{getter_js}}});{binds}"
            )
            body = mod.code.decode("utf-8", "replace")
            line_map.append((len(lines) + 1, body.count("\n") + 1, self.sources[mod.key][0]))
            lines.append(head + body)
            lines.append("}});")
        lines.append("})")
        return Bundle("\n".join(lines), entry, line_map, exports)


class _Rewriter:
    """Blank import/export syntax of one module and record what it binds and exports."""

    def __init__(self, linker: Linker, mod: _Module, buf: bytearray) -> None:
        self.linker, self.mod, self.buf = linker, mod, buf

    def text(self, node: tree_sitter.Node) -> str:
        return self.mod.code[node.start_byte : node.end_byte].decode()

    def put(self, node: tree_sitter.Node | _Span, replacement: str) -> None:
        """Overwrite a node with `replacement` padded by spaces, keeping the newlines."""
        raw = replacement.encode()
        start, end = node.start_byte, node.end_byte
        assert len(raw) <= end - start, "replacements never grow the source"
        self.buf[start : start + len(raw)] = raw
        for i in range(start + len(raw), end):
            if self.buf[i] not in (0x0A, 0x0D):
                self.buf[i] = 0x20

    def fail(self, node: tree_sitter.Node, message: str, name: str = "LinkError") -> NoReturn:
        line, col = position(self.mod.code, node)
        raise SourceError(message, name=name, line=line, column=col)

    def dep(self, string_node: tree_sitter.Node) -> str:
        spec = json.loads(self.text(string_node)) if self.text(string_node)[0] == '"' else None
        if spec is None:
            spec = self.text(string_node)[1:-1]
        mid = self.linker.resolve(self.mod.key, spec)
        if mid is None:
            self.fail(string_node, self.linker.explain(spec))
        if mid not in self.mod.deps:
            self.mod.deps.append(mid)
        return mid

    def run(self, root: tree_sitter.Node) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "import_statement":
                self.import_statement(node)
                continue
            if node.type == "export_statement" and node.parent and node.parent.type == "program":
                self.export_statement(node)
            elif node.type == "call_expression" and node.children[0].type == "import":
                self.dynamic_import(node)
            elif node.type == "meta_property" and self.text(node).startswith("import"):
                self.put(node, f"{RT}.meta")
            stack.extend(reversed(node.children))

    def import_statement(self, node: tree_sitter.Node) -> None:
        for child in node.children:
            if child.type == "import_require_clause":  # TS-only; TypeScript mode rejects it too
                self.fail(child, IMPORT_REQUIRE_UNSUPPORTED)
        if any(c.type == "type" for c in node.children):
            self.put(node, "")
            return
        mid = self.dep(required_field(node, "source"))
        ns = f"{RT}.imp({json.dumps(mid)})"
        clause = next((c for c in node.children if c.type == "import_clause"), None)
        for part in clause.children if clause else []:
            if part.type == "identifier":
                self.bind(part, self.text(part), mid, "default", ns)
            elif part.type == "namespace_import":
                local = next(c for c in part.children if c.type == "identifier")
                self.mod.bindings.append(f"{self.text(local)}={ns}")
            elif part.type == "named_imports":
                for spec in part.children:
                    if spec.type != "import_specifier" or any(
                        c.type == "type" for c in spec.children
                    ):
                        continue
                    name_node = required_field(spec, "name")
                    alias = spec.child_by_field_name("alias") or name_node
                    self.bind(spec, self.text(alias), mid, self.name(name_node), ns)
        self.put(node, "")

    def name(self, node: tree_sitter.Node) -> str:
        raw = self.text(node)
        return json.loads(raw) if raw.startswith('"') else raw.strip("'") if raw[0] == "'" else raw

    def bind(self, node: tree_sitter.Node, local: str, mid: str, name: str, ns: str) -> None:
        self.mod.wanted.append((mid, name, position(self.mod.code, node)))
        self.mod.bindings.append(f"{local}={ns}[{json.dumps(name)}]")

    def export_statement(self, node: tree_sitter.Node) -> None:
        kids = node.children
        source = node.child_by_field_name("source")
        is_default = any(c.type == "default" for c in kids)
        decl = node.child_by_field_name("declaration")
        clause = next((c for c in kids if c.type == "export_clause"), None)
        if source is not None:
            mid = self.dep(source)
            ns_export = next((c for c in kids if c.type == "namespace_export"), None)
            if ns_export is not None:
                alias = ns_export.children[-1]
                self.mod.local_exports[self.name(alias)] = f"{RT}.imp({json.dumps(mid)})"
            elif clause is not None:
                for spec in self.specifiers(clause):
                    name_node = required_field(spec, "name")
                    alias = spec.child_by_field_name("alias") or name_node
                    self.mod.wanted.append(
                        (mid, self.name(name_node), position(self.mod.code, spec))
                    )
                    self.mod.reexports[self.name(alias)] = (mid, self.name(name_node))
            else:
                self.mod.stars.append(mid)
            self.put(node, "")
            return
        if clause is not None:
            for spec in self.specifiers(clause):
                name_node = required_field(spec, "name")
                alias = spec.child_by_field_name("alias") or name_node
                self.mod.local_exports[self.name(alias)] = self.text(name_node)
            self.put(node, "")
            return
        if is_default:
            value = node.child_by_field_name("value") or decl
            named = value is not None and value.type in (
                "function_declaration",
                "generator_function_declaration",
                "class_declaration",
                "abstract_class_declaration",
            )
            keyword_end = value.start_byte if value is not None else node.end_byte
            head = _Span(node.start_byte, keyword_end)
            if named:
                assert value is not None  # `named` is only true for a declaration
                local = self.text(required_field(value, "name"))
                self.put(head, "")
            else:
                local = "$__d"
                self.put(head, "const $__d=")
            self.mod.local_exports["default"] = local
            return
        if decl is not None:
            for local in declared_names(decl, self.text):
                self.mod.local_exports[local] = local
            self.put(_Span(node.start_byte, decl.start_byte), "")

    @staticmethod
    def specifiers(clause: tree_sitter.Node) -> list[tree_sitter.Node]:
        return [
            s
            for s in clause.children
            if s.type == "export_specifier" and not any(c.type == "type" for c in s.children)
        ]

    def dynamic_import(self, node: tree_sitter.Node) -> None:
        args = node.child_by_field_name("arguments")
        first = next((c for c in args.children if c.is_named), None) if args else None
        if first is not None and first.type == "string":
            spec = self.name(first)
            if self.linker.resolve(self.mod.key, spec) is None:
                self.fail(first, self.linker.explain(spec))
        self.put(node.children[0], f"{RT}.i")


@dataclass
class _Span:
    start_byte: int
    end_byte: int
