"""Readable thread ids: `<agent>-<12 hex>`, for new threads and forks alike."""

from __future__ import annotations

import uuid

from weft.contract.thread_ids import thread_id, thread_id_prefix

__all__ = ["new_thread_id", "thread_id_prefix"]


def new_thread_id(agent: str) -> str:
    """A readable thread id, `<agent>-<12 hex>` (`helper-7f3a9c2e41b0`): the shape every
    generated thread id has, subagents' included (contract/thread_ids.py)."""
    return thread_id(agent, uuid.uuid4().hex)
