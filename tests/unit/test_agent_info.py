"""An agent's display fields (title, description, icon, side labels) reach thread_read."""

from __future__ import annotations

from unit_support import memory, snapshot

from weft.contract.definitions import AgentDef
from weft.contract.thread import ThreadRead
from weft.workflows import read_models


def test_thread_read_shows_the_agent_display_fields() -> None:
    """title, description, icon and each side's label are in thread_read's agentInfo."""
    mem = memory()
    mem.snapshot = snapshot(
        title="Trip planner",
        description="Plans trips",
        icon="/icons/trip.svg",
        sideA={"prompt": "p", "label": "Planner"},
    )
    info = read_models.thread_read(mem).model_dump(mode="json", by_alias=True)["agentInfo"]
    assert info == {
        "name": "helper",
        "title": "Trip planner",
        "description": "Plans trips",
        "icon": "/icons/trip.svg",
        "sideLabels": {"a": "Planner"},
    }


def test_agent_info_follows_a_handoff() -> None:
    """After a handoff, agentInfo describes the agent that now runs the thread."""
    mem = memory()
    assert mem.snapshot is not None
    expert = AgentDef.model_validate(
        {"name": "expert", "title": "Expert", "sideA": {"prompt": "p"}}
    )
    mem.snapshot = mem.snapshot.model_copy(update={"agents": {"expert": expert}})
    mem.active_agent = "expert"
    info = read_models.thread_read(mem).agent_info
    assert info is not None and (info.name, info.title) == ("expert", "Expert")


def test_a_preparing_thread_has_no_agent_info() -> None:
    """Before thread.init nothing is known of the agent's definition: agentInfo is absent."""
    read = read_models.thread_read(memory(loaded=False))
    assert read.agent_info is None
    assert ThreadRead.model_validate(read.model_dump(by_alias=True)).agent_info is None
