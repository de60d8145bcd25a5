"""`weft key create | list | revoke`: the API keys of `weft serve`, by tenant and scope
(docs/tenants.md). The CLI acts on the store directly, as the operator; a creation and a
revocation are recorded in the audit log as `cli:<os user>`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from weft.cli.thread_guard import audit_trail
from weft.client import audit_trail as audit
from weft.client.schedule_inputs import parse_duration
from weft.contract.tenants import SCOPES, check_tenant, parse_scopes
from weft.store import Store
from weft.store.api_keys import ApiKey, UnknownKey
from weft.workers.config import WeftConfig


def register(subparsers: Any) -> None:
    """Add `key` and its actions to the main `weft` CLI's subparsers."""
    key = subparsers.add_parser("key", help="API keys of `weft serve`: create, list, revoke")
    actions = key.add_subparsers(dest="action", required=True)
    create = actions.add_parser(
        "create", help="create a key for a tenant; it is printed once and stored only hashed"
    )
    create.add_argument("--tenant", required=True, help="the tenant the key acts for")
    create.add_argument("--scopes", required=True, help=f"comma-separated, of: {', '.join(SCOPES)}")
    create.add_argument("--expires-in", help="refuse the key after this long: 12h, 30d, 1d12h")
    create.add_argument("--description", help="what the key is for (shown by `list`)")
    create.add_argument("--json", action="store_true", help="print the key as JSON")
    create.set_defaults(handler=create_key)
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--tenant", help="only this tenant's keys")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.set_defaults(handler=list_keys)
    revoke = actions.add_parser("revoke", help="revoke a key: refused from its next request")
    revoke.add_argument("key_id", help="the key's id (`k…`, as `list` shows it)")
    revoke.set_defaults(handler=revoke_key)


async def create_key(args: argparse.Namespace, config: WeftConfig) -> int:
    """Create the key and print it once: its secret is stored nowhere."""
    try:
        tenant = check_tenant(args.tenant)
        scopes = parse_scopes(args.scopes)
        if "admin" in scopes and getattr(args, "acting_tenant", None):
            # An admin key reaches every tenant: not a key a CLI kept to one may make.
            raise ValueError(
                f"--scopes admin: the CLI acts for tenant {args.acting_tenant!r} (--tenant), "
                "and an admin key would reach every tenant"
            )
        expires_at = _expiry(args.expires_in)
    except ValueError as err:
        print(f"weft: {err}", file=sys.stderr)
        return 2
    with await _store(config) as store:
        created = await asyncio.to_thread(
            store.api_keys.create,
            tenant,
            list(scopes),
            expires_at=expires_at,
            description=args.description,
        )
        await audit_trail(store).record(
            audit.KEY_CREATE, audit.KEY_CREATE.done, tenant=tenant, key_id=created.key.key_id
        )
    if args.json:
        print(json.dumps({**_wire(created.key), "key": created.secret}, indent=2))
        return 0
    print(f"key {created.key.key_id} for tenant {tenant} ({', '.join(created.key.scopes)})")
    if expires_at is not None:
        print(f"expires {_iso(expires_at)}")
    print("the key (shown once; send it as `Authorization: Bearer <key>`):")
    print(created.secret)
    return 0


async def list_keys(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print the keys, oldest first: id, tenant, scopes, state, created, expires."""
    tenant = args.tenant
    if tenant is not None:
        try:
            check_tenant(tenant)
        except ValueError as err:
            print(f"weft: {err}", file=sys.stderr)
            return 2
    with await _store(config) as store:
        keys = await asyncio.to_thread(store.api_keys.list, tenant=tenant)
    if args.json:
        print(json.dumps([_wire(key) for key in keys], indent=2))
        return 0
    if not keys:
        print("no keys" + (f" for tenant {tenant}" if tenant else ""))
        return 0
    now = datetime.now(UTC)
    for key in keys:
        expires = f"  expires {_iso(key.expires_at)}" if key.expires_at else ""
        about = f"  {key.description}" if key.description else ""
        print(
            f"{key.key_id}  {key.tenant}  {','.join(key.scopes)}  {key.state(now)}"
            f"  created {_iso(key.created_at)}{expires}{about}"
        )
    return 0


async def revoke_key(args: argparse.Namespace, config: WeftConfig) -> int:
    """Revoke the key; revoking it again keeps the first time."""
    with await _store(config) as store:
        try:
            key = await asyncio.to_thread(store.api_keys.revoke, args.key_id)
        except UnknownKey:
            print(f"weft: no key {args.key_id!r} (`weft key list` shows them)", file=sys.stderr)
            return 1
        await audit_trail(store).record(
            audit.KEY_REVOKE, audit.KEY_REVOKE.done, tenant=key.tenant, key_id=key.key_id
        )
    assert key.revoked_at is not None
    print(f"key {key.key_id} (tenant {key.tenant}) revoked at {_iso(key.revoked_at)}")
    return 0


def _expiry(text: str | None) -> datetime | None:
    if text is None:
        return None
    delay = parse_duration(text, what="--expires-in")
    if delay.total_seconds() <= 0:
        raise ValueError(f"--expires-in {text!r}: the key would be expired already")
    return datetime.now(UTC) + delay


async def _store(config: WeftConfig) -> Store:
    return await asyncio.to_thread(Store.open, config.store_url())


def _wire(key: ApiKey) -> dict[str, Any]:
    return {
        "keyId": key.key_id,
        "tenant": key.tenant,
        "scopes": list(key.scopes),
        "state": key.state(datetime.now(UTC)),
        "description": key.description,
        "createdAt": _iso(key.created_at),
        "expiresAt": _iso(key.expires_at) if key.expires_at else None,
        "revokedAt": _iso(key.revoked_at) if key.revoked_at else None,
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["create_key", "list_keys", "register", "revoke_key"]
