"""Readable validation errors: one line per problem, naming the field by its JSON path."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(err: ValidationError, *, limit: int = 5) -> str:
    """Join the first `limit` problems as "field 'a.b': message"."""
    parts = []
    for problem in err.errors()[:limit]:
        where = ".".join(str(p) for p in problem["loc"]) or "(payload)"
        parts.append(f"field '{where}': {problem['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
