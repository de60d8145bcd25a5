"""An effect that queues a message: a thread's next turn, started by its alarm."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_effect


class WakeArgs(BaseModel):
    text: str


async def wake_up(state: ThreadState, args: WakeArgs) -> str:
    state.queue_message(args.text)
    return "woken"


effect = define_effect(args=WakeArgs, execute=wake_up, description="Queue a wake-up message")
