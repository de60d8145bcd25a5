"""The `effect.run` activity: run one due effect with a ThreadState (docs/effects.md).

Idempotent by effect id: the run's outcome is stored with the effect's staged writes in
one commit (`activities/effect_writes.py`), and an attempt that finds an outcome returns
it without running the effect again. An effect that raises is retried by Temporal up to
`max_attempts`; the last attempt records the failure (`job.failed`) instead of raising,
so the thread goes on. Only the completed run's intents reach the workflow.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from weft.activities.clock import now_iso
from weft.activities.effect_writes import staged_store
from weft.activities.sandbox import SandboxPool
from weft.activities.snapshots import SnapshotCache
from weft.activities.streaming import Heartbeater
from weft.activities.tool_invoker import ToolInvoker
from weft.activities.tool_state import ThreadState, idempotency_key, thread_state_for
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.effects import (
    ACTIVITY_EFFECT_RUN,
    JOB_KIND,
    EffectRunInput,
    EffectRunResult,
)
from weft.contract.events import Event
from weft.contract.validation import describe_validation_error
from weft.definitions import Definitions, FunctionEffect
from weft.store import Store


class EffectFailed(Exception):
    """The effect cannot run or raised; `code` names the kind of failure."""

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class EffectActivities:
    """Runs the worker's effects for the threads whose timers fired."""

    def __init__(
        self,
        store: Store,
        definitions: Definitions,
        snapshots: SnapshotCache,
        *,
        sandbox: SandboxPool | None = None,
    ) -> None:
        self._store = store
        self._definitions = definitions
        self._snapshots = snapshots
        self._sandbox = sandbox

    @activity.defn(name=ACTIVITY_EFFECT_RUN)
    async def run_effect(self, job: EffectRunInput) -> EffectRunResult:
        """Run `job.effect` once; on a retry after it finished, return what it returned."""
        await asyncio.to_thread(self._store.events.append, job.outbox)
        row = await asyncio.to_thread(self._store.effects.get, job.thread_id, job.effect.id)
        if row is not None and row.result is not None:
            return EffectRunResult.model_validate(row.result).model_copy(update={"replayed": True})
        attempt = activity.info().attempt
        started = time.monotonic()
        snapshot = await self._snapshots.get(job.snapshot_id)
        view, values, events = staged_store(self._store)
        state = await asyncio.to_thread(self._state, job, snapshot, view)
        try:
            async with Heartbeater():
                value = await self._run(job, state)
        except asyncio.CancelledError:
            state.abort.set()  # stop any sandboxed code the effect started
            raise
        except EffectFailed as failure:
            if failure.retryable and attempt < job.max_attempts:
                # Nothing of this attempt was committed: the retry starts clean.
                raise ApplicationError(str(failure), type=failure.code) from None
            result = EffectRunResult(status="failed", error=str(failure), error_code=failure.code)
            done = self._event(job, "job.failed", {"error": str(failure), "code": failure.code})
            await asyncio.to_thread(self._finish, job, result, {}, [done])
            return result
        result = EffectRunResult(status="completed", intents=state.intents)
        done = self._event(
            job,
            "job.completed",
            {
                "durationMs": round((time.monotonic() - started) * 1000),
                "attempt": attempt,
                "result": _jsonable(value),
                "intents": [intent.kind for intent in state.intents],
            },
        )
        await asyncio.to_thread(
            self._finish, job, result, values.encoded(job.thread_id), [*events.staged, done]
        )
        return result

    async def _run(self, job: EffectRunInput, state: ThreadState) -> Any:
        effect = self._definitions.effects.get(job.effect.name)
        if effect is None:
            known = ", ".join(sorted(self._definitions.effects)) or "(none)"
            raise EffectFailed(
                "effect_unavailable",
                f"effect {job.effect.name!r} is not defined on this worker; effects: {known}",
                retryable=False,
            )
        try:
            args: BaseModel = effect.args.model_validate(job.effect.args)
        except ValidationError as err:
            raise EffectFailed(
                "invalid_arguments",
                f"invalid arguments for effect {effect.name!r}: {describe_validation_error(err)}",
                retryable=False,
            ) from None
        try:
            return await _execute(effect, state, args)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            raise EffectFailed(
                "effect_exception",
                f"effect {effect.name!r} raised {type(err).__name__}: {err}\n"
                + traceback.format_exc(limit=6),
                retryable=True,
            ) from None

    def _state(
        self, job: EffectRunInput, snapshot: DefinitionSnapshot, store: Store
    ) -> ThreadState:
        prompt = snapshot.prompts[snapshot.agent_def(job.agent).side("a").prompt]
        state = thread_state_for(
            store,
            snapshot,
            thread_id=job.thread_id,
            agent=job.agent,
            prompt=prompt,
            session_id=job.session_id,
            turn_id=None,
            event_prefix=job.effect.id,
            # One run per effect id, retried with the same id until its outcome is stored.
            idempotency_key=idempotency_key(job.thread_id, f"effect:{job.effect.id}"),
            sandbox=self._sandbox,
            # invoke_tool from an effect runs under the side-A prompt's permission policy.
            invoker=ToolInvoker(
                definitions=self._definitions,
                snapshot=snapshot,
                prompt=prompt,
                running_call_id=job.effect.id,
                tool=f"effect {job.effect.name}",
            ),
        )
        state.use_effects(self._definitions.effects)
        return state

    def _finish(
        self,
        job: EffectRunInput,
        result: EffectRunResult,
        values: dict[str, str | None],
        events: list[Event],
    ) -> None:
        self._store.effects.finish(
            job.thread_id,
            job.effect.id,
            result=result.model_dump(mode="json", by_alias=True),
            values=values,
            events=events,
        )

    @staticmethod
    def _event(job: EffectRunInput, event_type: str, payload: dict[str, Any]) -> Event:
        # One outcome per effect: the id is the effect's, whichever attempt writes it.
        return Event(
            type=event_type,
            event_id=f"{job.effect.id}:done",
            timestamp=now_iso(),
            thread_id=job.thread_id,
            session_id=job.session_id,
            status="completed" if event_type == "job.completed" else "failed",
            payload={
                "kind": JOB_KIND,
                "effect": job.effect.model_dump(mode="json", by_alias=True),
                **payload,
            },
        )


async def _execute(effect: FunctionEffect, state: ThreadState, args: BaseModel) -> Any:
    if effect.is_async:
        return await effect.execute(state, args)
    return await asyncio.to_thread(effect.execute, state, args)


def _jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value)
    except Exception:
        return repr(value)[:1000]
