"""Names an exported declaration binds, destructuring patterns included (for the linker)."""

from __future__ import annotations

from collections.abc import Callable

import tree_sitter

from weft.activities.sandbox._erase import required_field

Text = Callable[[tree_sitter.Node], str]


def declared_names(decl: tree_sitter.Node, text: Text) -> list[str]:
    """Names bound by an exported declaration, including destructuring patterns."""
    if decl.type in ("lexical_declaration", "variable_declaration"):
        names: list[str] = []
        for d in decl.children:
            if d.type == "variable_declarator":
                names += _pattern_names(required_field(d, "name"), text)
        return names
    name = decl.child_by_field_name("name")
    return [text(name)] if name is not None else []


def _pattern_names(node: tree_sitter.Node, text: Text) -> list[str]:
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [text(node)]
    if node.type == "pair_pattern":
        return _pattern_names(required_field(node, "value"), text)
    if node.type == "assignment_pattern":
        return _pattern_names(required_field(node, "left"), text)
    found: list[str] = []
    for child in node.named_children:
        if child.type not in ("property_identifier", "number", "string"):
            found += _pattern_names(child, text)
    return found
