"""The routing facts of one model call: the models that may answer it, and which one it uses.

The workflow tries a prompt's model, then its fallbacks in order (workflows/model_step.py);
each try is one `model.call`, which knows from the snapshot where its model stands in that
list. Its ids leave the attempt out, so a retried attempt writes each fact once, and so
does the same model called again after a compaction in the same step.
"""

from __future__ import annotations

from typing import Any

from weft.activities.clock import now_iso
from weft.activities.model_request import AttemptIds
from weft.contract.activities import ModelCallInput
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event

# How weft chooses: the prompt names its model, the model names its fallbacks.
DECISION_SOURCE = "prompt_model"


def candidates_of(call: ModelCallInput, snapshot: DefinitionSnapshot) -> list[str]:
    """The models that may answer the call, in the order the workflow tries them."""
    if call.scope is not None:
        prompt = snapshot.prompts[call.scope.prompt]
    else:
        prompt = snapshot.prompts[snapshot.agent_def(call.agent).side(call.side).prompt]
    return [prompt.model, *snapshot.models[prompt.model].fallbacks]


def routing_events(
    call: ModelCallInput, snapshot: DefinitionSnapshot, ids: AttemptIds
) -> list[Event]:
    """`routing.candidates.resolved` and `routing.decided` (or `routing.single_candidate`)
    for the first model, `routing.fallback.applied` for a fallback."""
    candidates = candidates_of(call, snapshot)
    if call.model not in candidates:  # not routed by the prompt: nothing to explain
        return []
    rank = candidates.index(call.model)
    model = snapshot.models[call.model]
    chosen = {
        "selectedModel": model.name,
        "provider": model.provider,
        "providerModel": model.model,
        "candidateCount": len(candidates),
        "rank": rank,
        "decisionSource": DECISION_SOURCE,
    }
    if rank > 0:
        # Why the previous model gave up is its `model.failed` and the workflow's
        # `runtime.warning` (code `model_failed`), written with this call.
        fallback = {**chosen, "fromModel": candidates[rank - 1], "reason": "model_failed"}
        return [_event(call, ids, "routing.fallback.applied", fallback)]
    resolved = {
        "candidates": candidates,
        "candidateCount": len(candidates),
        "decisionSource": DECISION_SOURCE,
    }
    if len(candidates) == 1:
        decided = _event(call, ids, "routing.single_candidate", chosen)
    else:
        decided = _event(call, ids, "routing.decided", {**chosen, "fallbacks": candidates[1:]})
    return [_event(call, ids, "routing.candidates.resolved", resolved), decided]


def _event(
    call: ModelCallInput, ids: AttemptIds, event_type: str, payload: dict[str, Any]
) -> Event:
    request_id = ids["model_request_id"]
    return Event(
        type=event_type,
        event_id=f"{request_id}:{event_type}",
        timestamp=now_iso(),
        thread_id=call.thread_id,
        session_id=call.session_id,
        turn_id=ids["turn_id"],
        step_id=ids["step_id"],
        model_request_id=request_id,
        # Inside a prompt tool, every event names the call that runs it.
        payload={**payload, **call.scope.event_fields()} if call.scope else payload,
    )
