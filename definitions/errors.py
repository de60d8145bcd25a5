"""The error every definition problem becomes: it names the file (or source) and field."""

from __future__ import annotations

from collections.abc import Collection


class DefinitionError(ValueError):
    """A definition is invalid; the message names where and which field."""

    def __init__(self, source: str, field: str | None, message: str) -> None:
        self.source = source
        self.field = field
        self.detail = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


def known_names(table: Collection[str]) -> str:
    """The names a problem could have meant, for error messages: sorted, or "(none)"."""
    return ", ".join(sorted(table)) or "(none)"
