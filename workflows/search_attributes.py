"""Typed search attributes that make threads listable in the Temporal UI and CLI."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

AGENT = SearchAttributeKey.for_keyword("WeftAgent")
STATUS = SearchAttributeKey.for_keyword("WeftStatus")
PARENT_THREAD = SearchAttributeKey.for_keyword("WeftParentThread")
SESSION = SearchAttributeKey.for_keyword("WeftSession")
# Set while the thread waits on a human, to the action kind: list waiting threads with
# `WeftAwaitingAction IN ('ask_human', 'tool_permission', 'elicitation')`.
AWAITING_ACTION = SearchAttributeKey.for_keyword("WeftAwaitingAction")
# Set when a fork starts (client/forks.py), to the thread it was forked from.
FORKED_FROM = SearchAttributeKey.for_keyword("WeftForkedFrom")
# The digest of the definitions the thread runs with (docs/deploys.md): list the threads
# still on a version with `WeftDefinitionsDigest = '<digest>'`.
DEFINITIONS_DIGEST = SearchAttributeKey.for_keyword("WeftDefinitionsDigest")
# The tenant the thread belongs to (docs/tenants.md), set with the start, never upserted:
# the API lists a tenant's threads with `WeftTenant = '<tenant>'`.
TENANT = SearchAttributeKey.for_keyword("WeftTenant")

# Workers register these at start-up (workers/search_attributes.py); an unregistered key
# would fail every workflow task of the thread.
ALL_KEYS = (
    AGENT,
    STATUS,
    PARENT_THREAD,
    SESSION,
    AWAITING_ACTION,
    FORKED_FROM,
    DEFINITIONS_DIGEST,
    TENANT,
)


def start_attributes(tenant: str | None) -> TypedSearchAttributes | None:
    """What a thread starts with (its tenant), or None for one without a tenant: `default`,
    and the start command it always had."""
    return None if tenant is None else TypedSearchAttributes([SearchAttributePair(TENANT, tenant)])


def upsert_initial(agent: str, parent_thread_id: str | None, session_id: str | None) -> None:
    """Set the attributes a thread has for its whole life."""
    updates = [AGENT.value_set(agent), STATUS.value_set("preparing")]
    if parent_thread_id:
        updates.append(PARENT_THREAD.value_set(parent_thread_id))
    if session_id:
        updates.append(SESSION.value_set(session_id))
    workflow.upsert_search_attributes(updates)


def upsert_status(status: str) -> None:
    """Record the thread's status (running, waiting_input, cancelled, …)."""
    workflow.upsert_search_attributes([STATUS.value_set(status)])


def upsert_awaiting(kind: str | None) -> None:
    """Flag a thread that waits on a human (`ask_human`, `tool_permission` or an MCP
    `elicitation`), or clear it."""
    if kind is None:
        workflow.upsert_search_attributes([AWAITING_ACTION.value_unset()])
    else:
        workflow.upsert_search_attributes([AWAITING_ACTION.value_set(kind)])


def upsert_agent(agent: str) -> None:
    """Record the agent that runs the thread now (a handoff changes it)."""
    workflow.upsert_search_attributes([AGENT.value_set(agent)])


def upsert_definitions_digest(digest: str) -> None:
    """Record the version of the definitions the thread runs with now."""
    workflow.upsert_search_attributes([DEFINITIONS_DIGEST.value_set(digest)])
