"""The ThreadState a hook gets where no tool is running (model.call, thread.init)."""

from __future__ import annotations

import asyncio

from weft.activities.store import Store
from weft.activities.tool_state import ThreadState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.messages import Side
from weft.contract.thread_env import merge_env


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
    row = store.threads.get(thread_id)
    agent_def = snapshot.agent_def(agent)
    prompt_def = snapshot.prompts[prompt or agent_def.side(side).prompt]
    return ThreadState(
        store=store,
        thread_id=thread_id,
        agent_id=agent_def.name,
        user_id=row.user_id if row else None,
        session_id=session_id,
        turn_id=turn_id,
        tool_call_id=None,
        env=merge_env(prompt_def.env, agent_def.env, row.env if row else {}),
        abort=asyncio.Event(),
        event_prefix=event_prefix,
        intents_from=where,
    )
