"""The workflow's context counts: projection, budgets, learnt scale, carry-over."""

from __future__ import annotations

from weft.contract.context import ContextBoundary, ContextOptions, ContextReport
from weft.contract.context_state import ContextState
from weft.contract.definitions import ModelDef
from weft.contract.messages import Message

MODEL = ModelDef.model_validate(
    {
        "name": "m",
        "provider": "openai",
        "model": "gpt",
        "capabilities": {"maxContextTokens": 8192, "maxOutputTokens": 512},
    }
)
BUDGET = 8192 - 512 - 820


def message(position: int, text: str, **metadata: object) -> Message:
    return Message(
        id=f"m{position}",
        thread_id="t1",
        position=position,
        role="user",
        content=text,
        created_at=0,
        metadata=dict(metadata),
    )


def test_projection_adds_messages_since_the_last_request():
    state = ContextState()
    state.observe(ContextReport(request_tokens=6_500, request_bytes=1, prompt_budget=BUDGET))
    assert not state.over_budget(MODEL)
    state.note_message(message(0, "x" * 2_000), ContextOptions())
    assert state.projected_tokens() == 6_500 + 500 + 4
    assert state.over_budget(MODEL)


def test_a_spilled_message_counts_at_its_full_size_up_to_the_preview_cap():
    state = ContextState()
    state.observe(ContextReport(request_tokens=100, request_bytes=1, prompt_budget=BUDGET))
    spilled = message(0, "preview", spilled={"ref": "r", "bytes": 5_000_000})
    state.note_message(spilled, ContextOptions())
    cap = int(BUDGET * ContextOptions().preview_share)
    assert cap < state.pending_tokens <= cap + 100


def test_a_provider_count_is_learnt_as_a_bounded_scale():
    state = ContextState()
    state.learn(None, 9_000, 6_000)
    assert state.token_scale == 1.5
    state.learn(None, None, None)
    assert state.token_scale == 1.5 * 1.25
    state.learn(3_000, 10**9, 1)
    assert state.learnt_limit == 3_000
    assert state.token_scale == 16.0


def test_a_boundary_resets_the_counts_and_survives_carry_over():
    state = ContextState(requested="requested", pending_tokens=50)
    boundary = ContextBoundary(
        boundary_id="ctx_1",
        thread_id="t1",
        kind="summary",
        reason="requested",
        first_kept_position=40,
        summarised_from_position=0,
        summarised_messages=40,
        summary="s",
        tokens_before=7_000,
        tokens_after=2_000,
        created_at="2026-11-23T00:00:00Z",
    )
    state.apply(boundary)
    assert (state.requested, state.pending_tokens, state.last_request_tokens) == (None, 0, 2_000)
    window = state.window(ContextOptions())
    assert (window.boundary_id, window.first_kept_position) == ("ctx_1", 40)
    restored = ContextState.model_validate_json(state.model_dump_json())
    assert restored == state
    assert state.read()["lastCompaction"]["boundaryId"] == "ctx_1"
    assert "summary" not in state.read()["lastCompaction"]
