"""`weft tenant quota set|show|clear T`: a tenant's quotas, its active-thread limit and its
budget over all its threads, in the store named by the config (docs/tenants.md#quotas)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from weft.cli.thread_guard import audit_trail
from weft.client import audit_trail as audit
from weft.contract.tenants import check_tenant
from weft.store import Store
from weft.store.tenant_quotas import TenantQuota
from weft.workers.config import WeftConfig

# A flag's value that removes that limit.
NO_LIMIT = "none"


class _Unset:
    """A flag not given: the limit keeps its value."""


UNSET = _Unset()


def register(commands: Any) -> None:
    """Add `quota` to the `weft tenant` actions (`delete_command.register_tenant` makes
    `weft tenant`; it must run first)."""
    tenant = commands.choices["tenant"]
    actions = next(a for a in tenant._actions if isinstance(a, argparse._SubParsersAction))
    quota = actions.add_parser(
        "quota", help="a tenant's quotas: active threads, and a budget over all its threads"
    )
    quota_actions = quota.add_subparsers(dest="quota_action", required=True)

    set_ = quota_actions.add_parser(
        "set",
        help="set limits (flags not given keep their value; `none` removes a limit)",
        description="Set the tenant's quotas. A start over --max-active-threads, and a "
        "message or model call once its threads spent --max-tokens or --max-cost-usd, are "
        "refused (HTTP 429). Spend counts from the first `set`; `clear` forgets it.",
    )
    set_.add_argument("tenant", help="the tenant")
    set_.add_argument(
        "--max-active-threads",
        type=_limit(int),
        default=UNSET,
        metavar="N",
        help="threads open at once (`none`: no limit)",
    )
    set_.add_argument(
        "--max-tokens",
        type=_limit(int),
        default=UNSET,
        metavar="N",
        help="input + output tokens of all its threads (`none`: no limit)",
    )
    set_.add_argument(
        "--max-cost-usd",
        type=_limit(float),
        default=UNSET,
        metavar="USD",
        help="priced cost of all its threads, in USD (`none`: no limit)",
    )
    set_.add_argument("--json", action="store_true", help="print the quota as JSON")
    set_.set_defaults(handler=_set)

    show = quota_actions.add_parser("show", help="the tenant's quotas, spend and active threads")
    show.add_argument("tenant", help="the tenant")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    show.set_defaults(handler=_show)

    clear = quota_actions.add_parser("clear", help="remove the tenant's quotas and spend")
    clear.add_argument("tenant", help="the tenant")
    clear.set_defaults(handler=_clear)


def _limit(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float | None:
        if text.strip().lower() == NO_LIMIT:
            return None
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a{'n integer' if kind is int else ' number'} or `none`"
            ) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must be greater than 0, or `none`")
        return value

    return parse


async def _set(args: argparse.Namespace, config: WeftConfig) -> int:
    tenant = check_tenant(args.tenant)
    given = {
        name: getattr(args, name)
        for name in ("max_active_threads", "max_tokens", "max_cost_usd")
        if getattr(args, name) is not UNSET
    }
    if not given:
        raise ValueError(
            "weft tenant quota set: give --max-active-threads, --max-tokens or --max-cost-usd"
        )
    with await asyncio.to_thread(Store.open, config.store_url()) as store:
        old = await asyncio.to_thread(store.tenant_quotas.get, tenant)
        limits = {
            name: given[name] if name in given else (getattr(old, name) if old else None)
            for name in ("max_active_threads", "max_tokens", "max_cost_usd")
        }
        quota = await asyncio.to_thread(store.tenant_quotas.set, tenant, **limits)
        await audit_trail(store).record(audit.QUOTA_SET, audit.QUOTA_SET.done, tenant=tenant)
        active = await asyncio.to_thread(store.tenant_quotas.active_threads, tenant)
    _print(args, quota, active)
    return 0


async def _show(args: argparse.Namespace, config: WeftConfig) -> int:
    tenant = check_tenant(args.tenant)
    with await asyncio.to_thread(Store.open, config.store_url()) as store:
        quota = await asyncio.to_thread(store.tenant_quotas.get, tenant)
        active = await asyncio.to_thread(store.tenant_quotas.active_threads, tenant)
    if quota is None:
        if args.json:
            print(json.dumps({"tenant": tenant, "quota": None, "activeThreads": active}))
        else:
            print(f"tenant {tenant}: no quota ({active} active threads)")
        return 0
    _print(args, quota, active)
    return 0


async def _clear(args: argparse.Namespace, config: WeftConfig) -> int:
    tenant = check_tenant(args.tenant)
    with await asyncio.to_thread(Store.open, config.store_url()) as store:
        cleared = await asyncio.to_thread(store.tenant_quotas.clear, tenant)
        await audit_trail(store).record(audit.QUOTA_CLEAR, audit.QUOTA_CLEAR.done, tenant=tenant)
    print(f"tenant {tenant}: quota cleared" if cleared else f"tenant {tenant}: had no quota")
    return 0


def _print(args: argparse.Namespace, quota: TenantQuota, active: int) -> None:
    if args.json:
        print(json.dumps({**quota.as_json(), "activeThreads": active}))
        return

    def cap(value: float | None) -> str:
        return "no limit" if value is None else f"{value:g}"

    print(f"tenant {quota.tenant}")
    print(f"  active threads: {active} of {cap(quota.max_active_threads)}")
    print(f"  tokens:         {quota.tokens} of {cap(quota.max_tokens)}")
    print(f"  cost (USD):     {quota.cost_usd:.6g} of {cap(quota.max_cost_usd)}")


__all__ = ["register"]
