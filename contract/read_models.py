"""The Agent Runtime session snapshot, built from a thread read model and a message window.

Pure, so the workflow's `session_snapshot` query and the store-backed client build the
same shape (agentruntime-snapshot.schema.json).
"""

from __future__ import annotations

from typing import Any

from weft.contract.events import RUNTIME_ID, SCHEMA_VERSION
from weft.contract.thread import ThreadRead

# thread_read statuses in the snapshot schema's thread vocabulary; the native status is
# kept alongside as `nativeStatus`.
SNAPSHOT_STATUS = {
    "preparing": "running",
    "running": "running",
    "waiting_input": "idle",
    "waiting_permission": "blocked",
    "completed": "completed",
    "cancelled": "cancelled",
    "failed": "failed",
}


def session_snapshot(
    read: ThreadRead,
    messages: list[dict[str, Any]],
    *,
    older_cursor: int | None,
    total_messages: int,
    stale: bool = False,
) -> dict[str, Any]:
    """A snapshot of the thread's session: shell, pending requests, a window of messages.

    `messages` is the most recent window, oldest first; `older_cursor` (the first
    position of the window) fetches the window before it, None when there is none.
    """
    status = SNAPSHOT_STATUS.get(read.status, "unknown")
    if read.status == "waiting_input" and read.pending_actions:
        status = "blocked"  # an ask_human question waits for an answer
    if stale:
        status = "stale"
    thread: dict[str, Any] = {
        "threadId": read.thread_id,
        "status": status,
        "nativeStatus": read.status,
        "agent": read.agent,
        "pendingRequests": list(read.pending_actions),
        "actions": list(read.pending_actions),
        "queuedTurns": [q.model_dump(mode="json", by_alias=True) for q in read.queue],
        "incidents": list(read.incidents),
        "permissionState": dict(read.permission_state),
        "costState": read.usage.model_dump(mode="json", by_alias=True),
        "subagents": list(read.children),
        "lastOutcome": read.last_outcome,
        "stopReason": read.stop_reason,
        "unknown": list(read.unknown),
        "history": {
            "messages": messages,
            "olderCursor": older_cursor,
            "totalMessages": total_messages,
        },
    }
    if read.context is not None:
        # The compaction boundary in force: messages before `firstKeptPosition` reach the
        # model only as its summary; every original stays in `history`.
        thread["history"]["contextBoundary"] = read.context.get("lastCompaction")
        thread["limitState"] = {"context": read.context}
    if read.definitions_digest is not None:  # the definitions version it runs with
        thread["definitionsDigest"] = read.definitions_digest
    if read.active_turn_id:
        thread["activeTurnId"] = read.active_turn_id
        thread["turns"] = [{"turnId": read.active_turn_id, "status": "running"}]
    snapshot: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "runtimeId": RUNTIME_ID,
        "sessionId": read.session_id or read.thread_id,
        "threads": [thread],
        "historySummary": {"olderCursor": older_cursor, "totalMessages": total_messages},
    }
    if read.updated_at:
        snapshot["updatedAt"] = read.updated_at
    return snapshot
