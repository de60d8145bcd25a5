"""A tool with a side effect that must run once, and only after a human approved it."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class NoteArgs(BaseModel):
    text: str


async def careful_note(state: ThreadState, args: NoteArgs) -> str:
    runs = (await state.get_value("runs") or 0) + 1
    await state.set_value("runs", runs)
    return f"noted {args.text!r}"


tool = define_tool(description="Write a permanent note", args=NoteArgs, execute=careful_note)
