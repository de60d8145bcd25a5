"""A slow tool with a side effect, so a worker can be killed while it runs."""

import asyncio

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class NoteArgs(BaseModel):
    text: str
    seconds: float = 3.0


async def slow_note(state: ThreadState, args: NoteArgs) -> str:
    await asyncio.sleep(args.seconds)
    runs = (await state.get_value("runs") or 0) + 1
    await state.set_value("runs", runs)
    return f"noted {args.text!r}"


tool = define_tool(description="Slowly note a text", args=NoteArgs, execute=slow_note)
