"""A tool that schedules the `wake_up` effect: its thread has an effect pending across the
deploy."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class PlanArgs(BaseModel):
    text: str
    delay_ms: int


async def plan_wake(state: ThreadState, args: PlanArgs) -> str:
    return state.schedule_effect("wake_up", {"text": args.text}, args.delay_ms)


tool = define_tool(description="Plan a wake-up", args=PlanArgs, execute=plan_wake)
