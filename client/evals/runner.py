"""Run a suite's cases as real threads, a bounded number at once, each result written
atomically when its case ends so that a killed run resumes where it stopped."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from weft.activities.tool_replay import ReplayTable, ToolReplays
from weft.client.evals.closing import end_thread
from weft.client.evals.expect import answer_checks, limit_checks, tool_call_checks, turn_checks
from weft.client.evals.inflight import end_abandoned, mark
from weft.client.evals.recording import Recording, read_recording, turn_records
from weft.client.threads import Threads
from weft.contract.evals import (
    CaseResult,
    CaseTurn,
    Check,
    Divergence,
    EvalCase,
    EvalReport,
    Rubric,
    ToolMode,
    TurnRecord,
)
from weft.contract.messages import Message
from weft.contract.turns import TurnResult
from weft.store import Store


class Grader(Protocol):
    """Scores an answer against a rubric: (score 0..1, reason)."""

    async def grade(self, rubric: Rubric, question: str, answer: str | None) -> tuple[float, str]:
        """Grade `answer` to `question`."""
        ...


@dataclass
class RunOptions:
    """How a suite runs."""

    concurrency: int = 4
    tools: ToolMode | None = None  # recorded cases: None → replayed
    turn_timeout: float = 300.0
    min_pass_rate: float | None = None


def result_path(results: Path, name: str) -> Path:
    """Where a case's result is kept."""
    return results / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.json"


def finished(results: Path, name: str, digest: str) -> CaseResult | None:
    """A result of this case under the same digest, from an earlier run."""
    path = result_path(results, name)
    try:
        kept = CaseResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return kept if kept.digest == digest else None


def write_result(results: Path, result: CaseResult) -> None:
    """Write a case's result atomically: a killed run leaves a whole file or none."""
    results.mkdir(parents=True, exist_ok=True)
    path = result_path(results, result.name)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    os.replace(partial, path)


class EvalRunner:
    """Runs cases against the threads of one worker (`threads`' task queue)."""

    def __init__(
        self,
        threads: Threads,
        store: Store,
        *,
        replays: ToolReplays | None,
        grader: Grader | None = None,
        options: RunOptions | None = None,
        on_case: Callable[[CaseResult, int, int], None] | None = None,
    ) -> None:
        self._threads = threads
        self._store = store
        self._replays = replays
        self._grader = grader
        self._options = options or RunOptions()
        self._on_case = on_case
        self._importing = asyncio.Lock()

    async def run(
        self, suite: str, cases: list[EvalCase], digest: str, results: Path
    ) -> EvalReport:
        """Run every case not finished under `digest`; the report holds all of them."""
        report = EvalReport(suite=suite, digest=digest, min_pass_rate=self._options.min_pass_rate)
        kept = {c.name: r for c in cases if (r := finished(results, c.name, digest)) is not None}
        report.skipped = len(kept)
        gate = asyncio.Semaphore(max(1, self._options.concurrency))
        done = len(kept)

        await end_abandoned(self._threads, self._store, results)

        async def one(case: EvalCase) -> CaseResult:
            nonlocal done
            async with gate:
                thread_id = f"eval-{uuid.uuid4().hex[:12]}"
                marker = mark(results, case.name, thread_id)
                result = await self.run_case(case, digest, thread_id)
                write_result(results, result)
                marker.unlink(missing_ok=True)
            done += 1
            if self._on_case is not None:
                self._on_case(result, done, len(cases))
            return result

        fresh = await asyncio.gather(*(one(c) for c in cases if c.name not in kept))
        by_name = {**kept, **{r.name: r for r in fresh}}
        report.cases = [by_name[c.name] for c in cases]
        return report

    async def run_case(
        self, case: EvalCase, digest: str, thread_id: str | None = None
    ) -> CaseResult:
        """One case as a thread (`thread_id`, else a new id); a case that cannot run is a
        failed result saying why."""
        began = time.monotonic()
        result = CaseResult(
            name=case.name,
            passed=False,
            digest=digest,
            thread_id=thread_id or f"eval-{uuid.uuid4().hex[:12]}",
        )
        try:
            await self._run(case, result, began)
        except Exception as err:  # the case fails with the reason; the suite goes on
            result.error = f"{type(err).__name__}: {err}"
        result.wall_seconds = round(time.monotonic() - began, 3)
        result.passed = result.error is None and all(c.passed for c in result.checks)
        return result

    async def _run(self, case: EvalCase, result: CaseResult, began: float) -> None:
        recording: Recording | None = None
        source = case.recorded
        if case.bundle is not None:
            source = await self._imported(Path(case.bundle))
        if source is not None:
            recording = await asyncio.to_thread(read_recording, self._store, source)
        turns = case.turns or [
            CaseTurn(user=t.user) for t in (recording.turns if recording else [])
        ]
        agent = case.agent or (recording.agent if recording else "")
        thread_id = result.thread_id or ""
        table = self._table(case, recording)
        replays = self._replays
        if table is not None and replays is not None:  # _table needs replays to give one
            replays.register(thread_id, table)
        await asyncio.to_thread(self._fixtures, case, thread_id)
        await self._threads.start(agent, thread_id=thread_id)
        try:
            walls = []
            for turn in turns:
                started = time.monotonic()
                answered = await self._threads.ask(
                    thread_id, turn.user, timeout=self._options.turn_timeout
                )
                walls.append(time.monotonic() - started)
                result.turns.append(
                    await asyncio.to_thread(self._record, thread_id, turn.user, answered)
                )
        finally:
            await end_thread(self._threads, thread_id, "eval case done")
            if replays is not None:
                replays.forget(thread_id)
        await self._check(case, turns, result, walls, time.monotonic() - began)
        if table is not None:
            result.checks.append(
                Check(
                    name="toolReplay",
                    passed=not table.misses,
                    detail="; ".join(f"no recorded result for {m}" for m in table.misses),
                )
            )
        if recording is not None:
            result.divergence = divergence(recording.turns, result.turns)
            if case.same_as_recording:
                where = result.divergence
                result.checks.append(
                    Check(
                        name="sameAsRecording",
                        passed=where is None,
                        turn=where.turn if where else None,
                        detail=what_differs(where) if where else "",
                    )
                )

    async def _imported(self, bundle: Path) -> str:
        """The id a bundle's thread has in the store, imported on first use under an id
        derived from the file's bytes (the same bundle is imported once)."""
        from weft.client.bundles import import_bundle  # only suites with bundles need it

        digest = hashlib.sha256(await asyncio.to_thread(bundle.read_bytes)).hexdigest()
        thread_id = f"evalrec-{digest[:16]}"
        async with self._importing:
            if await asyncio.to_thread(self._store.threads.get, thread_id) is None:
                await import_bundle(self._store, bundle, as_id=thread_id)
        return thread_id

    def _table(self, case: EvalCase, recording: Recording | None) -> ReplayTable | None:
        mode = case.tools or self._options.tools or "replayed"
        if recording is None or mode == "live":
            return None
        if self._replays is None:
            raise RuntimeError("replayed tools need a worker built with ToolReplays (weft.evals)")
        return ReplayTable(recording.tool_results, subagents=recording.subagent_results)

    def _fixtures(self, case: EvalCase, thread_id: str) -> None:
        for key, value in case.fixtures.kv.items():
            self._store.values.set(thread_id, key, value)
        for path, content in case.fixtures.files.items():
            self._store.files.write_file(thread_id, path, content)

    def _record(self, thread_id: str, user: str, answered: TurnResult) -> TurnRecord:
        """What the turn did, from the store: its messages carry the turn id."""
        messages = [
            m
            for m in self._store.messages.list(thread_id, depth=0)
            if m.turn_id == answered.turn_id and m.role != "user"
        ]
        head = Message(
            id="_", thread_id=thread_id, position=-1, role="user", content=user, created_at=0
        )
        record = turn_records([head, *messages])[0]
        usage = answered.usage
        record.answer = answered.response if answered.response is not None else record.answer
        record.status = answered.status
        record.error = answered.error
        if usage is not None:
            record.tokens = usage.input_tokens + usage.output_tokens
            record.cost_usd = usage.cost_usd or 0.0
        return record

    async def _check(
        self,
        case: EvalCase,
        turns: list[CaseTurn],
        result: CaseResult,
        walls: list[float],
        wall: float,
    ) -> None:
        records = result.turns
        for number, (turn, record, turn_wall) in enumerate(
            zip(turns, records, walls, strict=True), 1
        ):
            if turn.expect is not None:
                result.checks += turn_checks(turn.expect, record, number, turn_wall)
                if turn.expect.rubric is not None:
                    result.checks.append(
                        await self._grade(turn.expect.rubric, turn.user, record.answer, number)
                    )
        expect = case.expect
        last = records[-1] if records else TurnRecord(user="")
        result.checks += answer_checks(expect, last.answer)
        result.checks += tool_call_checks(expect, [c for r in records for c in r.tool_calls])
        result.checks += limit_checks(expect, records, wall)
        if expect.rubric is not None:
            result.checks.append(await self._grade(expect.rubric, last.user, last.answer, None))

    async def _grade(
        self, rubric: Rubric, question: str, answer: str | None, turn: int | None
    ) -> Check:
        if self._grader is None:
            return Check(name="rubric", turn=turn, passed=False, detail="no grader configured")
        try:
            score, reason = await self._grader.grade(rubric, question, answer)
        except ValueError as err:  # the grader's reply was not a grade: the check fails
            return Check(name="rubric", turn=turn, passed=False, detail=str(err))
        return Check(
            name="rubric",
            turn=turn,
            passed=score >= rubric.pass_score,
            score=score,
            detail=f"score {score:g} (pass at {rubric.pass_score:g}): {reason}",
        )


def what_differs(where: Divergence) -> str:
    """`its answer differs from the recording's` (or its tool calls, or both)."""
    answer = where.recorded.answer != where.actual.answer
    calls = where.recorded.tool_calls != where.actual.tool_calls
    if answer and calls:
        return "its answer and tool calls differ from the recording's"
    if answer:
        return "its answer differs from the recording's"
    return "its tool calls differ from the recording's"


def divergence(recorded: list[TurnRecord], actual: list[TurnRecord]) -> Divergence | None:
    """The first turn whose answer or tool calls differ from the recording's."""
    for number, (was, now) in enumerate(zip(recorded, actual, strict=False), 1):
        if was.answer != now.answer or was.tool_calls != now.tool_calls:
            return Divergence(turn=number, recorded=was, actual=now)
    return None
