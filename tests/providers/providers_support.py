"""Helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weft.workers.scripted_model import ScriptedModelServer

AddScript = Callable[[dict[str, Any]], str]


def records_for(server: ScriptedModelServer, model: str) -> list[dict[str, Any]]:
    """Recorded requests addressed to one script."""
    return [r for r in server.requests if r["model"] == model]
