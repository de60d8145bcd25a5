"""Tenants and the scopes of their API keys (docs/tenants.md).

A thread belongs to one tenant for its whole life: named at its start, inherited by its
subagents, `default` when nobody named one. A tenant's name goes into Temporal visibility
queries and store columns, so it is a plain token: letters, digits and `_ . -`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"

# What a key may do. `admin` is every scope over every tenant, as the server's own token.
Scope = Literal[
    "threads:read", "threads:write", "actions:respond", "tasks:read", "tasks:write", "admin"
]
SCOPES: tuple[Scope, ...] = get_args(Scope)


def check_tenant(name: str) -> str:
    """`name` if it is a tenant name, else ValueError saying what one is."""
    if not re.fullmatch(TENANT_PATTERN, name):
        raise ValueError(
            f"tenant {name!r}: 1 to 64 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit"
        )
    return name


# Checked by `check_tenant`, so a refusal says what a name may hold rather than a regex.
TenantName = Annotated[
    str, AfterValidator(check_tenant), Field(json_schema_extra={"pattern": TENANT_PATTERN})
]


def parse_scopes(text: str) -> list[Scope]:
    """Comma-separated scopes (`threads:read,threads:write`), in the order given, each
    once; ValueError naming the first unknown one."""
    scopes: list[Scope] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        known = next((scope for scope in SCOPES if scope == part), None)
        if known is None:
            raise ValueError(f"scope {part!r} is unknown; known scopes: {', '.join(SCOPES)}")
        if known not in scopes:
            scopes.append(known)
    if not scopes:
        raise ValueError(f"no scope given; known scopes: {', '.join(SCOPES)}")
    return scopes


def tenant_clause(tenant: str) -> str:
    """The visibility clause that keeps a listing to `tenant`'s threads; a thread started
    without a tenant has no `WeftTenant` and is `default`'s. ValueError for a name that is
    not a tenant's (which could not be quoted safely either)."""
    check_tenant(tenant)
    if tenant == DEFAULT_TENANT:
        return f"(WeftTenant = '{DEFAULT_TENANT}' OR WeftTenant IS NULL)"
    return f"WeftTenant = '{tenant}'"


__all__ = [
    "tenant_clause",
    "DEFAULT_TENANT",
    "SCOPES",
    "TENANT_PATTERN",
    "Scope",
    "TenantName",
    "check_tenant",
    "parse_scopes",
]
