"""Model-graded rubrics: the grading prompt runs as a one-off thread on a grader agent over
the model the rubric names, through the worker's own provider adapters."""

from __future__ import annotations

import json
import re
import uuid

from weft.client.evals.closing import end_thread
from weft.client.threads import Threads
from weft.contract.evals import Rubric
from weft.definitions import Definitions, define_agent, define_prompt

GRADER_PREFIX = "weft-eval-grader--"
_INSTRUCTIONS = (
    "You grade an AI agent's answer against a rubric. Reply with JSON only: "
    '{"score": <a number from 0 to 1>, "reason": "<one sentence>"}.'
)


def grader_agent(model: str) -> str:
    """The grader agent (and prompt) for `model`."""
    return f"{GRADER_PREFIX}{model}"


def with_graders(definitions: Definitions, models: set[str]) -> Definitions:
    """`definitions` plus one grader agent per rubric model; a model the definitions do
    not define is refused naming it."""
    for model in sorted(models):
        if model not in definitions.models:
            raise ValueError(
                f"rubric.model {model!r} is not a model of the definitions under test; "
                f"models: {', '.join(sorted(definitions.models)) or '(none)'}"
            )
        if grader_agent(model) in definitions.agents:
            continue
        definitions.add(
            define_prompt(
                name=grader_agent(model),
                toolDescription="grades an answer",
                model=model,
                prompt=_INSTRUCTIONS,
            ),
            define_agent(name=grader_agent(model), sideA={"prompt": grader_agent(model)}),
        )
    return definitions


def grading_text(rubric: Rubric, question: str, answer: str | None) -> str:
    """The message the grader gets."""
    return f"Rubric:\n{rubric.prompt}\n\nQuestion:\n{question}\n\nAnswer:\n{answer or '(none)'}"


def parse_grade(text: str | None) -> tuple[float, str]:
    """The grader's `{score, reason}`; a reply that is not that is a ValueError quoting it."""
    found = re.search(r"\{.*\}", text or "", re.DOTALL)
    try:
        data = json.loads(found.group(0)) if found else None
        score = float(data["score"]) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError):
        score = None
    if score is None or not 0 <= score <= 1 or not isinstance(data, dict):
        raise ValueError(f"the grader did not answer {{score, reason}} JSON: {text!r}")
    return score, str(data.get("reason", ""))


class ThreadGrader:
    """Grades by asking a grader thread, which is terminated once it answered."""

    def __init__(self, threads: Threads, *, timeout: float = 300) -> None:
        self._threads = threads
        self._timeout = timeout

    async def grade(self, rubric: Rubric, question: str, answer: str | None) -> tuple[float, str]:
        """The rubric's score (0..1) and reason for `answer`."""
        agent = grader_agent(rubric.model)
        thread_id = f"{agent}-{uuid.uuid4().hex[:12]}"
        await self._threads.start(agent, thread_id=thread_id)
        try:
            result = await self._threads.ask(
                thread_id, grading_text(rubric, question, answer), timeout=self._timeout
            )
        finally:
            await end_thread(self._threads, thread_id, "graded")
        return parse_grade(result.response)
