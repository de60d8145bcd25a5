"""An effect that queues a message, for the drill that kills the worker before it fires."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_effect


class WakeArgs(BaseModel):
    text: str


async def wake_up(state: ThreadState, args: WakeArgs) -> str:
    runs = (await state.get_value("wake_runs") or 0) + 1
    await state.set_value("wake_runs", runs)
    state.queue_message(args.text)
    return f"woke {runs}"


effect = define_effect(args=WakeArgs, execute=wake_up, description="Queue a wake-up message")
