"""Parse TS/JS with tree-sitter and erase TypeScript types in place (Runtime §13.6).

Erasure blanks type ranges with spaces and keeps every newline, so each line and
column of the erased text is the caller's own; nothing is type-checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter
import tree_sitter_typescript


class SourceError(Exception):
    """A syntax, TypeScript-erasure or linkage problem at a position in one module."""

    def __init__(
        self,
        message: str,
        *,
        name: str = "SyntaxError",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.name = name
        self.message = message
        self.line = line
        self.column = column
        self.module: str | None = None


@cache
def _parser() -> tree_sitter.Parser:
    # Built lazily so importing this module costs nothing; one parser per process.
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript()))


def parse(code: bytes) -> tree_sitter.Tree:
    """Parse source bytes with the TypeScript grammar (a superset of the JS we accept)."""
    return _parser().parse(code)


def position(code: bytes, node: tree_sitter.Node) -> tuple[int, int]:
    """1-based line and column (in characters, not bytes) of a node's start."""
    row, byte_col = node.start_point
    line_start = node.start_byte - byte_col
    column = len(code[line_start : node.start_byte].decode("utf-8", "replace"))
    return row + 1, column + 1


def required_field(node: tree_sitter.Node, name: str) -> tree_sitter.Node:
    """A field the grammar always gives this node type (check_syntax rejected broken trees)."""
    child = node.child_by_field_name(name)
    assert child is not None, f"{node.type} has no {name!r}"
    return child


def _walk(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    # Iterative, so hostile deeply nested input cannot exhaust Python's recursion limit.
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def check_syntax(code: bytes, tree: tree_sitter.Tree) -> None:
    """Raise SourceError at the first ERROR or MISSING node of the tree."""
    if not tree.root_node.has_error:
        return
    for node in _walk(tree.root_node):
        if node.is_missing:
            line, col = position(code, node)
            raise SourceError(f"missing {node.type!r}", line=line, column=col)
        if node.type == "ERROR":
            line, col = position(code, node)
            text = code[node.start_byte : node.end_byte].decode("utf-8", "replace")
            raise SourceError(f"unexpected token {text[:30]!r}", line=line, column=col)
    raise SourceError("invalid syntax", line=1, column=1)


# Nodes that exist only in the type system: the whole range goes.
_TYPE_ONLY = {
    "type_annotation",
    "type_parameters",
    "type_arguments",
    "asserts_annotation",
    "type_predicate_annotation",
    "opting_type_annotation",
    "interface_declaration",
    "type_alias_declaration",
    "ambient_declaration",
    "abstract_method_signature",
    "function_signature",
    "method_signature",
    "index_signature",
    "implements_clause",
    "accessibility_modifier",
}
IMPORT_REQUIRE_UNSUPPORTED = "`import x = require(...)` is not supported; use `import`"

# Constructs with runtime semantics that erasure alone cannot express (as in Node's strip-types).
_UNSUPPORTED = {
    "enum_declaration": "enum declarations are not erasable; use a const object instead",
    "internal_module": "namespaces are not erasable; use a plain object or a module",
    "module": "namespaces are not erasable; use a plain object or a module",
    "import_require_clause": IMPORT_REQUIRE_UNSUPPORTED,
}
_MODIFIERS = {"readonly", "declare", "abstract", "override"}
_OPTIONAL_MARK_PARENTS = {
    "optional_parameter",
    "public_field_definition",
    "method_definition",
    "variable_declarator",
}


@dataclass
class _Blanker:
    buf: bytearray

    def blank(self, start: int, end: int) -> None:
        for i in range(start, end):
            if self.buf[i] not in (0x0A, 0x0D):
                self.buf[i] = 0x20

    def node(self, node: tree_sitter.Node) -> None:
        self.blank(node.start_byte, node.end_byte)


def _is_type_only_export(node: tree_sitter.Node) -> bool:
    return any(
        c.type
        in (
            "type",
            "interface_declaration",
            "type_alias_declaration",
            "ambient_declaration",
            "function_signature",
        )
        for c in node.children
    )


def erase_types(code: bytes, tree: tree_sitter.Tree) -> bytes:
    """Return `code` with every TypeScript-only range replaced by spaces."""
    out = _Blanker(bytearray(code))
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind in _UNSUPPORTED:
            line, col = position(code, node)
            raise SourceError(_UNSUPPORTED[kind], name="TypeScriptError", line=line, column=col)
        if kind in _TYPE_ONLY:
            if kind == "accessibility_modifier" and node.parent and "parameter" in node.parent.type:
                _reject_parameter_property(code, node)
            out.node(node)
            continue
        if kind == "export_statement" and _is_type_only_export(node):
            out.node(node)
            continue
        if kind == "export_statement" and any(c.type == "=" for c in node.children):
            line, col = position(code, node)
            raise SourceError(
                "`export =` is not supported; use `export default`",
                name="TypeScriptError",
                line=line,
                column=col,
            )
        if kind in ("as_expression", "satisfies_expression"):
            # Keep the expression, drop `as T` / `satisfies T`.
            expr = node.children[0]
            out.blank(expr.end_byte, node.end_byte)
            stack.append(expr)
            continue
        if kind == "type_assertion":
            out.node(node.children[0])
            stack.extend(reversed(node.children[1:]))
            continue
        if kind == "non_null_expression":
            out.node(node.children[-1])
        if kind == "required_parameter" and node.children and node.children[0].type == "this":
            _blank_list_item(out, node)
            continue
        if kind == "public_field_definition" and any(c.type == "declare" for c in node.children):
            out.node(node)
            continue
        for child in node.children:
            if not child.is_named and child.type in _MODIFIERS:
                if child.type == "readonly" and "parameter" in kind:
                    _reject_parameter_property(code, child)
                out.node(child)
            elif child.type in ("?", "!") and kind in _OPTIONAL_MARK_PARENTS:
                out.node(child)
        stack.extend(reversed(node.children))
    return bytes(out.buf)


def _reject_parameter_property(code: bytes, node: tree_sitter.Node) -> None:
    line, col = position(code, node)
    raise SourceError(
        "constructor parameter properties are not erasable; assign the field in the body",
        name="TypeScriptError",
        line=line,
        column=col,
    )


def _blank_list_item(out: _Blanker, node: tree_sitter.Node) -> None:
    """Blank a comma-separated item together with one adjacent comma, so the list stays valid."""
    out.node(node)
    nxt = node.next_sibling
    if nxt is not None and nxt.type == ",":
        out.node(nxt)
        return
    prev = node.prev_sibling
    if prev is not None and prev.type == ",":
        out.node(prev)
