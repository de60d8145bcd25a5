"""weft's search attributes on a Temporal namespace: checked at worker start, registered where
the server lets us, otherwise a refusal that lists the exact commands to run.

An attribute the namespace lacks fails every workflow task that upserts it, and Temporal
retries that task forever: the thread would sit RUNNING with nothing but a WARN line in the
worker log. So no worker polls before every attribute is there with the right type.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from weft.workflows.search_attributes import ALL_KEYS

# Every weft attribute is a Keyword (workflows/search_attributes.py).
REQUIRED: dict[str, IndexedValueType.ValueType] = {
    key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in ALL_KEYS
}


class SearchAttributesMissing(RuntimeError):
    """The namespace lacks weft's search attributes (or has them with another type) and
    they could not be registered; the message lists the commands that fix it."""

    def __init__(
        self,
        *,
        namespace: str,
        address: str,
        missing: list[str],
        wrong_type: dict[str, str],
        cause: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.missing = missing
        self.wrong_type = wrong_type
        self.commands = _commands(address, namespace, missing, wrong_type)
        problems = []
        if missing:
            problems.append(f"missing: {', '.join(missing)}")
        if wrong_type:
            found = ", ".join(f"{name} is {kind}" for name, kind in sorted(wrong_type.items()))
            problems.append(f"not Keyword: {found}")
        lines = [
            f"namespace {namespace!r} at {address} lacks weft's search attributes"
            f" ({'; '.join(problems)}).",
        ]
        if cause:
            lines.append(f"Registering them failed: {cause}")
        lines += [
            "Without them every workflow task of a thread fails, so the worker does not start.",
            "Create them (Temporal Cloud: add them to the namespace in the Cloud UI or with"
            " tcld), then start the worker again:",
            *(f"  {command}" for command in self.commands),
        ]
        super().__init__("\n".join(lines))


def _commands(
    address: str, namespace: str, missing: list[str], wrong_type: dict[str, str]
) -> list[str]:
    where = f"--address {address} --namespace {namespace}"
    commands = [
        f"temporal operator search-attribute remove {where} --name {name} --yes"
        for name in sorted(wrong_type)
    ]
    commands += [
        f"temporal operator search-attribute create {where} --name {name} --type Keyword"
        for name in sorted([*missing, *wrong_type])
    ]
    return commands


async def check_search_attributes(
    client: Client, namespace: str, *, register: bool = True
) -> list[str]:
    """Make sure weft's attributes exist as Keywords; returns the ones this call added.

    With `register`, missing ones are added through the operator service (a dev server
    allows it; Temporal Cloud and locked-down clusters refuse). Raises
    `SearchAttributesMissing`, listing the `temporal operator search-attribute` commands,
    when any is still missing or has another type.
    """
    address = client.service_client.config.target_host
    missing, wrong_type = await _problems(client, namespace)
    cause: str | None = None
    added: list[str] = []
    if missing and register:
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=namespace,
                    search_attributes={name: REQUIRED[name] for name in missing},
                )
            )
        except RPCError as err:
            cause = str(err)
        else:
            added = missing
            # Trust the listing, not the call: only attributes the server lists are usable.
            missing, wrong_type = await _problems(client, namespace)
            if missing:
                cause = "the server accepted the request but does not list them"
    if missing or wrong_type:
        raise SearchAttributesMissing(
            namespace=namespace,
            address=address,
            missing=missing,
            wrong_type=wrong_type,
            cause=cause,
        )
    return added


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register any of weft's attributes the namespace lacks; returns the ones added."""
    return await check_search_attributes(client, namespace, register=True)


async def _problems(client: Client, namespace: str) -> tuple[list[str], dict[str, str]]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    custom = listed.custom_attributes
    missing = sorted(name for name in REQUIRED if name not in custom)
    wrong_type = {
        name: _type_name(custom[name])
        for name, kind in REQUIRED.items()
        if name in custom and custom[name] != kind
    }
    return missing, wrong_type


def _type_name(kind: IndexedValueType.ValueType) -> str:
    # INDEXED_VALUE_TYPE_KEYWORD_LIST -> KeywordList, as the temporal CLI spells types.
    raw = IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_")
    return "".join(part.capitalize() for part in raw.split("_"))


__all__ = [
    "REQUIRED",
    "SearchAttributesMissing",
    "check_search_attributes",
    "ensure_search_attributes",
]
