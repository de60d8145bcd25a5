"""What the Temporal UI shows of a thread: one-line activity summaries and the workflow's
current details (markdown), built from what the workflow already holds.

Summaries are user metadata on the commands, not part of what replay compares, and current
details are answered by Temporal's own metadata query: neither adds a command.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from weft.contract.budget import BudgetState
from weft.contract.carry_parts import ActionBook, SubagentBook
from weft.contract.messages import Side
from weft.contract.thread import Counters, QueueEntry, ThreadStartInput, ThreadStatus, UsageTotals
from weft.contract.ui_text import REDACTED, is_secret_name, one_line, redact, safe_line

# One argument value in a tool's summary: enough to recognise, never the content.
ARGUMENT_MAX_CHARS = 24


class DetailsShown(Protocol):
    """What the Temporal UI's current details show of the thread (read-only)."""

    @property
    def start(self) -> ThreadStartInput: ...

    @property
    def active_agent(self) -> str | None: ...

    @property
    def status(self) -> ThreadStatus: ...

    @property
    def active_turn(self) -> str | None: ...

    @property
    def active_side(self) -> Side | None: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def queue(self) -> Sequence[QueueEntry]: ...

    @property
    def actions(self) -> ActionBook: ...

    @property
    def subagents(self) -> SubagentBook: ...

    @property
    def budget(self) -> BudgetState | None: ...

    def total_usage(self) -> UsageTotals: ...


def model_call(model: str, step: int, side: Side, *, prompt: str | None = None) -> str:
    """`model gpt-4o · step 3 · side a`, and the prompt tool it runs for, if any."""
    parts = [f"model {model}", f"step {step}", f"side {side}"]
    if prompt:
        parts.append(f"prompt {prompt}")
    return one_line(" · ".join(parts))


def tool_call(name: str, arguments: str, secrets: Sequence[str]) -> str:
    """`search(query="how do I…", limit=5)`: the tool and a short view of its arguments."""
    return safe_line(f"{name}({_arguments(arguments, secrets)})", secrets)


def files_copy(source: str, target: str, paths: Sequence[str]) -> str:
    """`copy notes.md +2 · thread-a → thread-b`."""
    more = f" +{len(paths) - 1}" if len(paths) > 1 else ""
    first = paths[0] if paths else "nothing"
    return one_line(f"copy {first}{more} · {source} → {target}")


def compaction(model: str, reason: str, *, harder: bool = False) -> str:
    """`compact context for gpt-4o · over_budget`."""
    return one_line(f"compact context for {model} · {reason}" + (" · harder" if harder else ""))


def effect_run(name: str, effect_id: str) -> str:
    """The effect, as its timer's summary names it."""
    return one_line(f"run effect {name} ({effect_id})")


def thread_init(agent: str) -> str:
    return one_line(f"load definitions of {agent}")


def variables_request(subagent: str, missing: Sequence[str]) -> str:
    """Only variable names: their values are what the request waits for."""
    return one_line(f"ask for {', '.join(missing)} to start {subagent}")


def store_flush(events: int, messages: int, *, thread_row: bool) -> str:
    row = " + thread row" if thread_row else ""
    return one_line(f"write {events} events, {messages} messages{row}")


def current_details(mem: DetailsShown) -> str:
    """The thread now, in Temporal markdown: status, turn, queue, actions, children, spend."""
    lines = [f"**{mem.active_agent or mem.start.agent}** · `{mem.status}`"]
    if mem.active_turn:
        side = f" · side {mem.active_side}" if mem.active_side else ""
        lines.append(f"- turn `{mem.active_turn}`{side} · step {mem.counters.steps}")
    lines.append(f"- queue: {len(mem.queue)}")
    if mem.actions.pending:
        asks = Counter(f"{a.kind} {a.tool_name}" for a in mem.actions.pending.values())
        lines.append(f"- pending actions: {_counted(asks)}")
    children = [c for c in mem.subagents.children.values() if not c.closed]
    if children:
        states = Counter(f"{c.name} {c.status}" for c in children)
        lines.append(f"- children: {_counted(states)}")
    lines.append(f"- {_usage(mem)}")
    if mem.budget is not None and not mem.budget.limits.is_empty():
        lines.append(f"- budget: {budget(mem.budget)}")
    return "\n".join(lines)


def budget(state: BudgetState) -> str:
    """Spent against each limit set, and the limit that blocked the tree, if any."""
    limits, spent = state.limits, state.spent
    parts = []
    if limits.max_tokens is not None:
        parts.append(f"{spent.tokens:,} / {limits.max_tokens:,} tokens")
    if limits.max_cost_usd is not None:
        parts.append(f"${spent.cost_usd:.4f} / ${limits.max_cost_usd:.2f}")
    if limits.max_model_calls is not None:
        parts.append(f"{spent.model_calls} / {limits.max_model_calls} model calls")
    if limits.max_wall_seconds is not None:
        parts.append(f"{spent.wall_seconds:.0f} / {limits.max_wall_seconds:.0f} s")
    text = " · ".join(parts)
    return f"{text} · **blocked by {state.blocked}**" if state.blocked else text


def _usage(mem: DetailsShown) -> str:
    usage = mem.total_usage()
    tokens = usage.input_tokens + usage.output_tokens
    cost = "cost unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return f"used {tokens:,} tokens · {cost}"


def _counted(counts: Counter[str]) -> str:
    return ", ".join(f"{label} ×{n}" if n > 1 else label for label, n in sorted(counts.items()))


def _arguments(arguments: str, secrets: Sequence[str]) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return _value(arguments, secrets)
    if not isinstance(parsed, dict):
        return _value(parsed, secrets)
    return ", ".join(
        f"{key}={REDACTED if is_secret_name(str(key)) else _value(value, secrets)}"
        for key, value in parsed.items()
    )


def _value(value: Any, secrets: Sequence[str]) -> str:
    # Nested values are not opened: they are content, and could hide a secret's key.
    if isinstance(value, dict):
        return "{…}" if value else "{}"
    if isinstance(value, list):
        return f"[{len(value)}]"
    if isinstance(value, str):
        return json.dumps(one_line(redact(value, secrets), ARGUMENT_MAX_CHARS), ensure_ascii=False)
    return redact(json.dumps(value), secrets)
