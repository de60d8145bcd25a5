"""The carry-over's wire shape: every committed continued run's start input still decodes
into the thread's parts and encodes back to what it was (or more)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from unit_support import FixedContext

from weft.contract.thread import ThreadStartInput
from weft.workflows.continuation import carry_over, restore

HISTORIES = Path(__file__).parent.parent / "histories"
FULL_CARRY = Path(__file__).parent / "carry_over_full.json"


def _carried_payloads() -> list[tuple[str, dict[str, Any]]]:
    """Each committed history's start input that carries a previous run's memory."""
    found = []
    for path in sorted(HISTORIES.glob("continued_as_new*.json")):
        started = json.loads(path.read_text())["events"][0]
        attributes = started["workflowExecutionStartedEventAttributes"]
        start = json.loads(base64.b64decode(attributes["input"]["payloads"][0]["data"]))
        if start.get("carryOver") is not None:
            found.append((path.name, start))
    # Every part populated (queue, boundary, turns, children, actions, effects, MCP, budget),
    # as a run of the earlier carry-over code wrote it: the histories carry mostly defaults.
    full = json.loads(FULL_CARRY.read_text())
    found.append((FULL_CARRY.name, {"agent": "helper", "carryOver": full}))
    return found


CARRIED = _carried_payloads()


def _missing(old: Any, new: Any, at: str = "") -> list[str]:
    """Where `new` lacks or changes something `old` says (extra keys in `new` are fine)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for key in old for p in _missing(old[key], new.get(key, _ABSENT), f"{at}.{key}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            p
            for i, (o, n) in enumerate(zip(old, new, strict=True))
            for p in _missing(o, n, f"{at}[{i}]")
        ]
    return [] if old == new else [at or "."]


_ABSENT = object()


def test_the_committed_carry_overs_are_found() -> None:
    """The histories hold carry-overs of every era (before the gauge, the settle, the truthful log, now)."""
    eras = {name.rsplit("_run", 1)[0] for name, _ in CARRIED}
    assert len(CARRIED) >= 13 and len(eras) == 5


@pytest.mark.parametrize(("name", "start"), CARRIED, ids=[name for name, _ in CARRIED])
def test_a_committed_carry_over_decodes_and_encodes_back(name: str, start: dict[str, Any]) -> None:
    """The carried shapes read an old run's carry-over and write every field of it back unchanged."""
    decoded = ThreadStartInput.model_validate(start)
    assert decoded.carry_over is not None
    [payload] = pydantic_data_converter.payload_converter.to_payloads([decoded])
    assert _missing(start, json.loads(payload.data)) == []


@pytest.mark.parametrize(("name", "start"), CARRIED, ids=[name for name, _ in CARRIED])
def test_a_committed_carry_over_survives_restore_and_carry_over(
    name: str, start: dict[str, Any]
) -> None:
    """A run restored from an old carry-over carries the same memory on (its run number one up)."""
    decoded = ThreadStartInput.model_validate(start)
    carried = decoded.carry_over
    assert carried is not None
    mem = restore("t1", decoded, carried, FixedContext())
    again = carry_over(mem, carried.snapshot, carried.turn)
    old = {k: v for k, v in start["carryOver"].items() if k != "continuedFrom"}
    new = again.model_dump(mode="json")
    assert new["counters"]["runs"] == old["counters"]["runs"] + 1
    new["counters"]["runs"] = old["counters"]["runs"]
    assert _missing(old, new) == []
