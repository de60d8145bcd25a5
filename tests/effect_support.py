"""Effects and tools for the effect tests: definitions made in Python, run by an in-process
worker (and the same effect as a file in tests/crash_definitions/effects/ for the drills)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field
from support import agent_definitions

from weft.definitions import Definitions, define_effect, define_tool

# Attempts per (thread, effect name), so a test can fail an effect's first attempt.
ATTEMPTS: Counter[tuple[str, str]] = Counter()


class RemindArgs(BaseModel):
    text: str = ""
    queue: bool = True


async def remind(state: Any, args: RemindArgs) -> dict[str, Any]:
    """Count the run (read-modify-write), emit an event, invoke a tool, and queue the text
    as a message."""
    noted = await state.invoke_tool("note", {"text": f"invoked by remind: {args.text}"})
    await state.set_value("remind_invoked", noted.status)
    runs = (await state.get_value("remind_runs") or 0) + 1
    await state.set_value("remind_runs", runs)
    await state.emit("reminded", {"text": args.text})
    if args.queue:
        state.queue_message(args.text)
    return {"runs": runs}


class FlakyArgs(BaseModel):
    fail_attempts: int = Field(default=1, ge=0)


async def flaky(state: Any, args: FlakyArgs) -> str:
    """Write, then raise on the first `fail_attempts` attempts: the writes must land once."""
    count = (await state.get_value("flaky_count") or 0) + 1
    await state.set_value("flaky_count", count)
    await state.emit("flaky", {"count": count})
    ATTEMPTS[(state.thread_id, "flaky")] += 1
    if ATTEMPTS[(state.thread_id, "flaky")] <= args.fail_attempts:
        raise RuntimeError("flaky effect failed on purpose")
    return f"count {count}"


class ChainArgs(BaseModel):
    then: str
    delay_ms: int = 0


def chain(state: Any, args: ChainArgs) -> str:
    """An effect that schedules another effect (sync, run in a worker thread)."""
    effect_id: str = state.schedule_effect("remind", {"text": args.then}, args.delay_ms)
    return effect_id


class NapArgs(BaseModel):
    seconds: float


async def nap(state: Any, args: NapArgs) -> str:
    """A slow effect, for terminate while it runs."""
    await state.set_value("napped", True)
    await asyncio.sleep(args.seconds)
    return "rested"


class PlanArgs(BaseModel):
    effect: str
    args: dict[str, Any] = Field(default_factory=dict)
    delay_ms: int = 0


async def plan(state: Any, args: PlanArgs) -> dict[str, Any]:
    """A tool that schedules an effect and lists what is pending afterwards."""
    effect_id = state.schedule_effect(args.effect, args.args, args.delay_ms)
    return {"id": effect_id, "pending": await state.get_scheduled_effects()}


class CancelArgs(BaseModel):
    id: str


async def cancel_effect(state: Any, args: CancelArgs) -> dict[str, Any]:
    """A tool that removes a pending effect."""
    return {"removed": await state.remove_scheduled_effect(args.id)}


class ListArgs(BaseModel):
    name: str | None = None


async def list_effects(state: Any, args: ListArgs) -> list[dict[str, Any]]:
    return list(await state.get_scheduled_effects(args.name))


def effect_definitions(script: str, **agent_fields: Any) -> Definitions:
    """The helper agent with the effect tools, and the effects above."""
    definitions = agent_definitions(
        script, tools=["note", "plan", "cancel_effect", "list_effects"], **agent_fields
    )
    return definitions.add(
        define_tool(name="plan", description="Schedule an effect", args=PlanArgs, execute=plan),
        define_tool(
            name="cancel_effect",
            description="Remove a scheduled effect",
            args=CancelArgs,
            execute=cancel_effect,
        ),
        define_tool(
            name="list_effects", description="List effects", args=ListArgs, execute=list_effects
        ),
        define_effect(name="remind", args=RemindArgs, execute=remind),
        define_effect(name="flaky", args=FlakyArgs, execute=flaky),
        define_effect(name="chain", args=ChainArgs, execute=chain),
        define_effect(name="nap", args=NapArgs, execute=nap),
    )
