"""The model's view of a thread within its budget (Runtime §4, plus weft's boundaries).

A request holds a frame (the side's system prompt and tools) and the transcript from the
boundary in force: the boundary's summary joins the system prompt, pinned messages follow,
then every message from `first_kept_position` on. A tool result is sent as its text, not
its stored envelope (`model_view`). A message over the preview cap is sent as a preview
with a ref that the `read_output` tool pages through; the store keeps it whole.
`model.call` and `context.compact` build requests here, so the size a compaction promises
is the size the next call sends.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from pydantic_core import from_json

from weft.activities.context import render_prompt
from weft.activities.images import ImageView
from weft.activities.message_views import (
    MessageViews,
    WindowSums,
    WindowTails,
    WirePart,
)
from weft.activities.read_output import READ_OUTPUT_SPEC
from weft.contract.context import READ_OUTPUT_TOOL, ContextBoundary, ContextReport, ContextWindow
from weft.contract.context_tokens import (
    ContextLimits,
    estimate_message_tokens,
    estimate_tokens,
    preview_cap_tokens,
)
from weft.contract.definitions import DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.mcp import McpServerCatalog, failed_servers, offered_mcp_tools, servers_of
from weft.contract.messages import Message, Side
from weft.contract.prompt_tools import PromptScope
from weft.contract.thread_env import prompt_env
from weft.contract.tool_catalog import offered_tools
from weft.store import Store
from weft.store.protocols import HasFiles
from weft.store.rows import ThreadRow
from weft.store.thread_cache_budget import DEFAULT_THREADS
from weft.store.thread_env_rows import ThreadEnvRow
from weft.store.transcripts import MessageJson, message_json

# When the kept tail does not begin with a user message, providers that insist on one
# (Anthropic) get this in its place; it also tells the model why the turn starts mid-way.
BRIDGE_TEXT = "[weft: the conversation continues from the summary above.]"
SUMMARY_HEADING = "\n\n## Summary of the earlier conversation\n"
# Enough of a message's JSON text for its id, thread id and position.
_HEAD_CHARS = 4096
# Frames one worker keeps of each thread (a side's, a prompt tool's, at an env version),
# least recently made dropped first.
FRAMES_PER_THREAD = 4


@dataclass(frozen=True)
class Frame:
    """What every request of one side holds besides the transcript."""

    prompt: PromptDef
    system: str
    tools: list[dict[str, Any]]
    dual: bool


@dataclass(frozen=True)
class Sizes:
    """What a window's messages measure: estimated tokens, and each one's JSON bytes summed."""

    tokens: int
    json_bytes: int


@dataclass(frozen=True)
class Window:
    """The transcript part of a request, as the provider adapters take it."""

    messages: list[dict[str, Any]]
    previews: int
    # Measured while the window was built, from each message's kept part; None when
    # something else (a hook) has changed the messages since.
    sizes: Sizes | None = None
    # Each message's compact JSON, as built with it (None once a hook has changed the
    # messages): an adapter that sends the messages as they are joins these instead of
    # encoding the whole transcript again for every request.
    encoded: list[bytes] | None = None

    def changed(self, messages: list[dict[str, Any]]) -> Window:
        """The window with `messages` instead (a hook's): what was measured and encoded
        with the old ones no longer holds."""
        return replace(self, messages=messages, sizes=None, encoded=None)


def frame(
    snapshot: DefinitionSnapshot,
    thread: ThreadRow | ThreadEnvRow | None,
    agent: str | None,
    side: Side,
    scope: PromptScope | None = None,
    *,
    mcp: Mapping[str, McpServerCatalog] | None = None,
) -> Frame:
    """The side's rendered system prompt and offered tools (env merged as Runtime §4 says).

    Inside a prompt tool (`scope`), its own prompt and tools, without the side's lifecycle
    tools: ending turns and sessions is the caller's business. The prompt's MCP tools come
    from the catalogues in `mcp` (by server); a server that failed to list, or whose tools
    were skipped, is noted in the system prompt so the model knows what it lacks.
    """
    agent_def = snapshot.agent_def(agent)
    side_def = agent_def.side(side)
    prompt = snapshot.prompts[scope.prompt if scope else side_def.prompt]
    lifecycle = [] if scope else side_def.lifecycle_tools()
    env = prompt_env(prompt, agent_def, thread.env if thread else None)
    tools = [
        snapshot.tools[n].model_dump(include={"name", "description", "parameters"})
        for n in offered_tools(snapshot, prompt, lifecycle, env)
    ]
    system = render_prompt(prompt, snapshot, env)
    if mcp:
        taken = {t["name"] for t in tools}
        tools += [s.offered() for s in offered_mcp_tools(prompt.tools, mcp) if s.name not in taken]
        system += mcp_notes(prompt, mcp)
    return Frame(prompt, system, tools, agent_def.type == "dual_ai")


def mcp_notes(prompt: PromptDef, catalogs: Mapping[str, McpServerCatalog]) -> str:
    """What the system prompt tells the model of the prompt's MCP servers' missing tools."""
    notes = [
        f"\n\nNote: the tools of MCP server {c.server!r} are unavailable this turn: {c.error}"
        for c in failed_servers(prompt.tools, catalogs)
    ]
    for server in servers_of(prompt.tools, catalogs):
        notes += [f"\n\nNote: {warning}." for warning in catalogs[server].warnings]
    return "".join(notes)


def preview_cap(model: ModelDef, window: ContextWindow) -> int:
    """The most tokens one message may take in a request to `model`."""
    return preview_cap_tokens(limits_of(model, window).prompt_budget, window.preview_share)


def limits_of(model: ModelDef, window: ContextWindow) -> ContextLimits:
    """The token limits of a call to `model`, within any smaller window a provider reported."""
    return ContextLimits.for_model(model, learnt_limit=window.learnt_limit)


def image_view(files: HasFiles, thread_id: str, model: ModelDef, prompt: PromptDef) -> ImageView:
    """How a request to `model` for `prompt` shows image attachments (activities/images.py),
    reading files of `thread_id`."""

    def load(path: str) -> bytes | None:
        try:
            return files.files.read_file(thread_id, path)
        except (OSError, ValueError):  # missing, a directory, or not a valid path
            return None

    capabilities = model.capabilities
    return ImageView(
        model=model.name,
        sees_images=capabilities is None or capabilities.supports_images is not False,
        recent=prompt.recent_image_threshold,
        load=load,
    )


def load_window(
    store: Store, thread_id: str, window: ContextWindow
) -> tuple[ContextBoundary | None, list[Message], list[Message]]:
    """The boundary in force, its pinned messages and the main transcript from it on.

    A prompt tool's own messages (depth > 0) are never part of it.
    """
    boundary = store.boundaries.get(thread_id, window.boundary_id) if window.boundary_id else None
    first = boundary.first_kept_position if boundary else 0
    pinned = store.messages.get_many(thread_id, boundary.pinned_message_ids) if boundary else []
    return boundary, pinned, store.transcripts.since(thread_id, first)


class Framed(NamedTuple):
    """A frame, and the system message of a window without a boundary, measured."""

    frame: Frame
    head: WirePart


class Frames:
    """Each side's frame, worked out once per worker under a key naming everything it
    depends on: the snapshot (stored by digest, never changed), the agent, the side, the
    prompt tool, the version of the thread's env (env_versions.py) and the MCP catalogues
    (by digest). Kept per thread: `max_frames` of each of at most `max_threads` threads
    (least recently used dropped first). A frame is shared between requests: never mutate
    it."""

    def __init__(
        self, max_threads: int = DEFAULT_THREADS, max_frames: int = FRAMES_PER_THREAD
    ) -> None:
        self._max_threads = max_threads
        self._max_frames = max_frames
        self._frames: OrderedDict[str, dict[Hashable, Framed]] = OrderedDict()
        self._lock = threading.Lock()  # requests are built on several pool threads at once

    def get(
        self,
        thread_id: str,
        key: Hashable | None,
        snapshot: DefinitionSnapshot,
        thread: ThreadRow | ThreadEnvRow | None,
        agent: str | None,
        side: Side,
        scope: PromptScope | None = None,
        *,
        mcp: Mapping[str, McpServerCatalog] | None = None,
    ) -> Framed:
        """The frame kept under `key`, or worked out (see `frame`) and kept; with no key
        (the env may have changed unseen), worked out and not kept."""
        if key is not None:
            with self._lock:
                kept = self._frames.get(thread_id, {}).get(key)
                if kept is not None:
                    self._frames.move_to_end(thread_id)
                    return kept
        made = frame(snapshot, thread, agent, side, scope, mcp=mcp)
        framed = Framed(made, WirePart.of({"role": "system", "content": made.system}))
        if key is not None:
            with self._lock:
                own = self._frames.setdefault(thread_id, {})
                self._frames.move_to_end(thread_id)
                own[key] = framed
                while len(own) > self._max_frames:
                    del own[next(iter(own))]
                while len(self._frames) > self._max_threads:
                    self._frames.popitem(last=False)
        return framed

    def forget(self, thread_id: str) -> None:
        """Drop the thread's frames (the workflow cache dropped the thread)."""
        with self._lock:
            self._frames.pop(thread_id, None)

    def threads_held(self) -> int:
        """How many threads' frames are kept."""
        with self._lock:
            return len(self._frames)


class Assembled(NamedTuple):
    """Everything a request needs of its context: the frame, the window, the tools
    offered, the measure against the prompt budget, and what the window selected."""

    frame: Frame
    window: Window
    tools: list[dict[str, Any]]
    report: ContextReport
    selection: dict[str, Any]


def assemble(
    framed: Framed,
    boundary: ContextBoundary | None,
    pinned: list[Message],
    history: Sequence[Message | MessageJson],
    *,
    model: ModelDef,
    window: ContextWindow,
    side: Side,
    files: HasFiles,
    thread_id: str,
    views: MessageViews,
    tails: WindowTails | None = None,
) -> Assembled:
    """The request's context, in one call: the window of `history` (from `boundary`, after
    `pinned`) within `model`'s limits, the tools, the measure and the selection.

    With `tails`, the window's sums are kept for the thread's next window, which then
    works out only what it adds (message_views.py); without, `views` keeps each
    message's part.
    """
    listed = [*pinned, *history]
    texts = (
        [m if isinstance(m, str) else message_json(m) for m in listed] if tails is not None else []
    )
    frame_ = framed.frame
    images = image_view(files, thread_id, model, frame_.prompt)
    budget = ContextLimits.for_model(model, learnt_limit=window.learnt_limit).prompt_budget
    cap = preview_cap_tokens(budget, window.preview_share)
    if tails is not None:
        sums = tails.sums(thread_id, texts, cap, side=side, dual=frame_.dual, images=images)
    else:
        parts = views.parts(
            listed, cap, side=side, dual=frame_.dual, images=images, thread_id=thread_id
        ).parts
        sums = WindowSums.of(parts)
    return _assembled(framed, sums, boundary, pinned, history, model, budget)


def _assembled(
    framed: Framed,
    sums: WindowSums,
    boundary: ContextBoundary | None,
    pinned: list[Message],
    history: Sequence[Message | MessageJson],
    model: ModelDef,
    prompt_budget: int,
) -> Assembled:
    """The window of the frame's system message (the kept one, unless a summary joins it)
    and `sums`, with its tools, measure and selection."""
    frame_ = framed.frame
    if boundary is None:
        built = _window_of(framed.head, sums, boundary)
    else:
        system = frame_.system + SUMMARY_HEADING + boundary.summary
        built = _window_of(WirePart.of({"role": "system", "content": system}), sums, boundary)
    tools, report = request_of(frame_, built, boundary, model, prompt_budget)
    return Assembled(frame_, built, tools, report, selection(boundary, pinned, history))


def request_of(
    frame_: Frame,
    window: Window,
    boundary: ContextBoundary | None,
    model: ModelDef,
    prompt_budget: int,
) -> tuple[list[dict[str, Any]], ContextReport]:
    """The tools a request offers with `window`, and its measure against `prompt_budget`."""
    capabilities = model.capabilities
    tools = tools_for(
        frame_,
        window,
        boundary,
        model_calls_tools=capabilities is None or capabilities.supports_tool_calls is not False,
    )
    tokens, size = measure_request(window, tools)
    report = ContextReport(
        request_tokens=tokens,
        request_bytes=size,
        prompt_budget=prompt_budget,
        previews=window.previews,
        boundary_id=boundary.boundary_id if boundary else None,
    )
    return tools, report


def build_window(
    frame_: Frame,
    boundary: ContextBoundary | None,
    pinned: list[Message],
    messages: Sequence[Message | MessageJson],
    *,
    side: Side,
    cap: int,
    images: ImageView | None = None,
    views: MessageViews | None = None,
    kept_as: KeptAs | None = None,
    thread_id: str = "",
) -> Window:
    """System (with the summary), pinned messages, then the tail; big messages previewed;
    with `images`, recent image attachments as image parts; measured as it is built.
    The tail may be the transcript cache's texts (`MessageJson`), parsed only where no
    part is kept. `views` keeps each message's part between calls (a worker's model calls
    share one), as `thread_id`'s; without it, the parts are worked out for this window
    only. With `kept_as`, the window's sums are kept as its thread's and the thread's next
    window of the same shape works out only what it adds (activities/message_views.py)."""
    system = frame_.system
    if boundary is not None:
        system += SUMMARY_HEADING + boundary.summary
    listed = [*pinned, *messages]
    if kept_as is not None:
        tails, owner = kept_as
        texts = [m if isinstance(m, str) else message_json(m) for m in listed]
        sums = tails.sums(owner, texts, cap, side=side, dual=frame_.dual, images=images)
    else:
        kept = views if views is not None else MessageViews()
        parts = kept.parts(
            listed, cap, side=side, dual=frame_.dual, images=images, thread_id=thread_id
        ).parts
        sums = WindowSums.of(parts)
    return _window_of(WirePart.of({"role": "system", "content": system}), sums, boundary)


class KeptAs(NamedTuple):
    """Where a window's sums are kept for the next one: the worker's tails, and the thread
    they are kept as (a window of each request shape: cap, side and dual)."""

    tails: WindowTails
    thread_id: str


# What a tail that does not begin with a user message after a boundary gets first.
_BRIDGE = WirePart.of({"role": "user", "content": BRIDGE_TEXT})


def _window_of(head: WirePart, sums: WindowSums, boundary: ContextBoundary | None) -> Window:
    """The window of the system message `head` and the measured messages `sums`.

    A tail that does not begin with a user message after a boundary gets the bridge first.
    """
    first = sums.entries[0] if sums.entries else None
    system, bridge = head.entry, _BRIDGE.entry
    assert system is not None and bridge is not None, "both are seen by every side"
    if boundary is not None and first is not None and first["role"] != "user":
        return Window(
            [system, bridge, *sums.entries],
            sums.previews,
            Sizes(
                head.tokens + _BRIDGE.tokens + sums.tokens,
                head.json_bytes + _BRIDGE.json_bytes + sums.json_bytes,
            ),
            [head.encoded, _BRIDGE.encoded, *sums.encoded],
        )
    return Window(
        [system, *sums.entries],
        sums.previews,
        Sizes(head.tokens + sums.tokens, head.json_bytes + sums.json_bytes),
        [head.encoded, *sums.encoded],
    )


def measure_request(window: Window, tools: list[dict[str, Any]]) -> tuple[int, int]:
    """`request_tokens` and `request_bytes` of the window and tools, from the window's
    sizes when it has them (the same figures, without going over every message again)."""
    if window.sizes is None:
        return request_tokens(window.messages, tools), request_bytes(window.messages, tools)
    tool_tokens = estimate_tokens(_json(tools)) if tools else 0
    count = len(window.messages)
    # [[m1,m2,…],tools]: the brackets and commas around each message's own JSON.
    framing = 2 + max(count - 1, 0) + 3
    tool_bytes = len(_json(tools).encode("utf-8"))
    return window.sizes.tokens + tool_tokens, window.sizes.json_bytes + framing + tool_bytes


def tools_for(
    frame_: Frame,
    window: Window,
    boundary: ContextBoundary | None,
    *,
    model_calls_tools: bool = True,
) -> list[dict[str, Any]]:
    """The frame's tools, plus `read_output` while a preview or a summary may need it.

    A model that cannot call tools (`supportsToolCalls: false`) is never offered the reader:
    its previews stay previews.
    """
    needs_reader = window.previews > 0 or (boundary is not None and "weft://" in boundary.summary)
    if (
        not needs_reader
        or not model_calls_tools
        or any(t["name"] == READ_OUTPUT_TOOL for t in frame_.tools)
    ):
        return frame_.tools
    return [*frame_.tools, READ_OUTPUT_SPEC]


def request_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """Estimated prompt tokens of a request: its messages and its tool definitions."""
    return estimate_message_tokens(messages) + (estimate_tokens(_json(tools)) if tools else 0)


def request_bytes(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """UTF-8 bytes of the request's messages and tools as JSON (before the adapter's framing)."""
    return len(_json([messages, tools]).encode("utf-8"))


def selection(
    boundary: ContextBoundary | None,
    pinned: Sequence[Message],
    messages: Sequence[Message | MessageJson],
) -> dict[str, Any]:
    """What a window selected of the transcript, for `context.resolved`: counts, the first
    and last message sent (id and position) and the boundary in force; never content."""
    first = _head(messages[0]) if messages else {}
    last = _head(messages[-1]) if messages else {}
    return {
        "messages": len(pinned) + len(messages),
        "pinnedMessages": len(pinned),
        "firstMessageId": first.get("id"),
        "firstPosition": first.get("position"),
        "lastMessageId": last.get("id"),
        "lastPosition": last.get("position"),
        "boundary": (
            {
                "boundaryId": boundary.boundary_id,
                "kind": boundary.kind,
                "firstKeptPosition": boundary.first_kept_position,
                "summarisedMessages": boundary.summarised_messages,
                "summaryTokens": estimate_tokens(boundary.summary),
            }
            if boundary is not None
            else None
        ),
    }


def _head(message: Message | MessageJson) -> dict[str, Any]:
    """A message's id and position; from a kept text, only its head is parsed: `id`,
    `thread_id` and `position` lead every message's JSON, and a text may be megabytes."""
    if isinstance(message, Message):
        return {"id": message.id, "position": message.position}
    head = from_json(message[:_HEAD_CHARS], allow_partial=True)
    return head if isinstance(head, dict) else {}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
