"""Eval suites (`weft eval`): authored and recorded cases, their expectations and results.

A case file is YAML; field names are camelCase like every weft contract (snake_case is
accepted too). docs/evals.md is the user's view.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from weft.contract.wire import CamelModel

ToolMode = Literal["live", "replayed"]


class ToolCallSpec(CamelModel):
    """One expected tool call: its name, and arguments that must be a JSON subset of the
    call's (omitted: any arguments)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None


class ToolCallsExpect(CamelModel):
    """The turn's tool calls, in order: `equal` (exactly these), `include` (these, as a
    subsequence) or `exclude` (none of these)."""

    equal: list[ToolCallSpec] | None = None
    include: list[ToolCallSpec] | None = None
    exclude: list[ToolCallSpec] | None = None


class Rubric(CamelModel):
    """A model-graded check: `prompt` is sent with the question and answer to `model` (a
    model definition of the definitions under test), which answers JSON
    `{"score": 0..1, "reason": "..."}`; the check passes at `passScore` or above."""

    prompt: str = Field(min_length=1)
    model: str = Field(min_length=1)
    pass_score: float = Field(default=0.7, ge=0, le=1)


class Expectations(CamelModel):
    """What a turn (or, at case level, every turn and the case's totals) must satisfy."""

    contains: list[str] = Field(default_factory=list, description="substrings of the answer")
    matches: str | None = Field(default=None, description="a regex the answer must match")
    tool_calls: ToolCallsExpect | None = None
    schema_: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description="a JSON Schema the answer, parsed as JSON, validates against",
    )
    max_steps: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_wall_seconds: float | None = Field(default=None, gt=0)
    no_failed_turn: bool = Field(default=True, description="no turn ends failed")
    rubric: Rubric | None = None

    @field_validator("matches")
    @classmethod
    def _a_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"not a regular expression: {err}") from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_substring(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("contains"), str):
            return {**data, "contains": [data["contains"]]}
        return data


class CaseTurn(CamelModel):
    """One user turn of an authored case, with its own expectations."""

    user: str = Field(min_length=1)
    expect: Expectations | None = None


class Fixtures(CamelModel):
    """What the thread holds before its first turn: key-value entries and files."""

    kv: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="path → text content")


class EvalCase(CamelModel):
    """One case: authored (`turns`) or recorded (`recorded`: a thread id in the store,
    whose user turns are replayed and whose tool results serve the calls)."""

    name: str = Field(default="", description="defaults to the file's stem")
    agent: str | None = Field(default=None, description="recorded: defaults to its agent")
    turns: list[CaseTurn] = Field(default_factory=list)
    recorded: str | None = None
    bundle: str | None = Field(
        default=None,
        description="recorded, from an export bundle (docs/export-import.md): its path, "
        "relative to the case file; imported into the store once",
    )
    fixtures: Fixtures = Field(default_factory=Fixtures)
    expect: Expectations = Field(default_factory=Expectations)
    tools: ToolMode | None = Field(
        default=None,
        description="a recorded case's tools: replayed (the default) or live; an authored "
        "case's tools run live (there is nothing to replay)",
    )
    same_as_recording: bool = Field(
        default=True,
        description="recorded: each turn's answer and tool calls must equal the recording's",
    )
    # The file the case was read from, for errors that name it (not part of the case).
    _source: str = PrivateAttr(default="")

    @property
    def source(self) -> str:
        """The case's file, or its name when it was not read from one."""
        return self._source or self.name

    def from_file(self, path: str) -> EvalCase:
        """This case, known to come from `path`."""
        self._source = path
        return self

    @model_validator(mode="after")
    def _one_source(self) -> EvalCase:
        if sum(map(bool, (self.turns, self.recorded, self.bundle))) != 1:
            raise ValueError(
                "a case needs one of `turns` (authored), `recorded` (a thread id) or "
                "`bundle` (an export bundle's path)"
            )
        if self.turns and self.agent is None:
            raise ValueError("an authored case needs `agent`")
        if self.turns and self.tools == "replayed":
            raise ValueError(
                "tools: replayed needs a recorded case (an authored one has no recording)"
            )
        return self


class CallRecord(CamelModel):
    """A tool call as a turn made it."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class TurnRecord(CamelModel):
    """What one turn did: the answer, its tool calls, how it ended and what it cost."""

    user: str
    answer: str | None = None
    tool_calls: list[CallRecord] = Field(default_factory=list)
    status: str = "completed"
    error: str | None = None
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class Check(CamelModel):
    """One expectation's verdict: what was checked, whether it held, and why not."""

    name: str
    turn: int | None = Field(default=None, description="1-based; None for the whole case")
    passed: bool
    detail: str = ""
    score: float | None = Field(default=None, description="a rubric's score")


class Divergence(CamelModel):
    """The first turn of a recorded case where the new run differs from the recording."""

    turn: int
    recorded: TurnRecord
    actual: TurnRecord


class CaseResult(CamelModel):
    """How one case went; written atomically to the results folder when it ends."""

    name: str
    passed: bool
    digest: str = Field(description="the suite+definitions digest it ran under")
    thread_id: str | None = None
    checks: list[Check] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    divergence: Divergence | None = None
    error: str | None = Field(default=None, description="why the case could not run")
    wall_seconds: float = 0.0


class EvalReport(CamelModel):
    """A suite's outcome: every case, and whether the suite passed."""

    suite: str
    digest: str
    cases: list[CaseResult] = Field(default_factory=list)
    skipped: int = Field(default=0, description="cases finished by an earlier run, reused")
    min_pass_rate: float | None = None

    @property
    def passed_count(self) -> int:
        """Cases that passed."""
        return sum(case.passed for case in self.cases)

    @property
    def pass_rate(self) -> float:
        """Passed cases over all cases (1.0 for an empty suite)."""
        return self.passed_count / len(self.cases) if self.cases else 1.0

    @property
    def ok(self) -> bool:
        """Every case passed, or the pass rate reaches `min_pass_rate` when one is set."""
        if self.min_pass_rate is not None:
            return self.pass_rate >= self.min_pass_rate
        return self.passed_count == len(self.cases)
