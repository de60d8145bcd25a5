"""A tool a person must approve first: its thread waits on a human across the deploy."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class NoteArgs(BaseModel):
    text: str


async def careful_note(state: ThreadState, args: NoteArgs) -> str:
    return f"noted {args.text!r}"


tool = define_tool(description="Write a permanent note", args=NoteArgs, execute=careful_note)
