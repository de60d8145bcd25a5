"""The ThreadState a hook gets where no tool is running (model.call, thread.init)."""

from __future__ import annotations

from weft.activities.tool_state import ThreadState, thread_state_for
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.messages import Side
from weft.store import Store


def hook_state(
    store: Store,
    snapshot: DefinitionSnapshot,
    *,
    thread_id: str,
    agent: str | None,
    side: Side,
    prompt: str | None,
    session_id: str | None,
    turn_id: str | None,
    event_prefix: str,
    where: str,
) -> ThreadState:
    """The thread's state with the env a tool of the active prompt would see (Runtime §4).

    Intents raise (`where` names the activity): nothing there carries them to the workflow.
    """
    agent_def = snapshot.agent_def(agent)
    return thread_state_for(
        store,
        snapshot,
        thread_id=thread_id,
        agent=agent,
        prompt=snapshot.prompts[prompt or agent_def.side(side).prompt],
        session_id=session_id,
        turn_id=turn_id,
        event_prefix=event_prefix,
        intents_from=where,
    )
