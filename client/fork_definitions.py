"""The definitions a fork runs on: the source's snapshot, or one of the definitions given,
with a prompt or model changed (docs/time-travel.md)."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client

from weft.contract.activities import ACTIVITY_THREAD_INIT, ThreadInitResult
from weft.contract.definitions import DefinitionSnapshot, ToolSpec
from weft.contract.thread import ThreadStartInput
from weft.definitions import DefinitionError, Definitions
from weft.definitions.api import FunctionTool
from weft.definitions.loader import load_directory

# The kinds a definitions set sent over HTTP may hold: YAML only. Tools, hooks and effects
# are Python that would run in the worker, and an MCP server may start a command there.
UPLOADABLE_KINDS = ("models", "prompts", "agents")
_UPLOADED_PATH = re.compile(
    rf"^(?:{'|'.join(UPLOADABLE_KINDS)})/[A-Za-z0-9_][A-Za-z0-9_.\-]*\.ya?ml$"
)


async def source_start(
    client: Client, thread_id: str
) -> tuple[ThreadStartInput, DefinitionSnapshot]:
    """The start input of the source's current run and the snapshot it runs on, read from
    its Temporal history (a read: the source is not disturbed)."""
    history = await client.get_workflow_handle(thread_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    converter = client.data_converter
    (start,) = await converter.decode(started.input.payloads, [ThreadStartInput])
    if start.carry_over is not None:  # a continued run carries its snapshot
        return start, start.carry_over.snapshot
    init_id = None
    for event in history.events:
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes"):
            if scheduled.activity_type.name == ACTIVITY_THREAD_INIT:
                init_id = event.event_id
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id == init_id:
                (result,) = await converter.decode(completed.result.payloads, [ThreadInitResult])
                return start, result.snapshot
    raise ValueError(f"thread {thread_id!r} has no definitions snapshot yet (still starting)")


def fork_snapshot(
    source: DefinitionSnapshot,
    *,
    agent: str | None = None,
    model: str | None = None,
    prompt: str | None = None,
    definitions: Definitions | str | Path | Mapping[str, str] | None = None,
) -> DefinitionSnapshot:
    """The snapshot a fork runs on; a name it cannot find raises ValueError naming the flag.
    `definitions` is a set, a folder, or documents by path (`uploaded_definitions`).

    A fork onto other definitions than the source's is pinned to them: its worker serves
    the source's agent, and a `latest` policy would take those back at the fork's next
    session (`weft thread upgrade` still moves it to the worker's, when asked)."""
    changed = _changed_snapshot(source, agent, model, prompt, definitions)
    if changed is source:
        return source
    pinned = changed.agent.model_copy(update={"definitions_policy": "pinned"})
    changed = changed.model_copy(update={"agent": pinned})
    return changed.model_copy(update={"snapshot_id": _content_id(changed)})


def _changed_snapshot(
    source: DefinitionSnapshot,
    agent: str | None,
    model: str | None,
    prompt: str | None,
    definitions: Definitions | str | Path | Mapping[str, str] | None,
) -> DefinitionSnapshot:
    snapshot = source
    if definitions is not None:
        defs = _definitions(definitions, source)
        name = agent or source.agent.name
        try:
            snapshot = defs.snapshot(name)
        except DefinitionError as err:
            raise ValueError(f"--agent: {err}") from None
    elif agent is not None and agent != source.agent.name:
        raise ValueError(
            f"--agent: {agent!r} is not the source's agent ({source.agent.name!r}); "
            "give --definitions to take it from a definitions folder"
        )
    if prompt is None and model is None:
        return snapshot
    side = snapshot.agent.side_a
    if prompt is not None:
        if prompt not in snapshot.prompts:
            raise ValueError(_unknown("--prompt", "prompt", prompt, snapshot.prompts))
        side = side.model_copy(update={"prompt": prompt})
    prompts = dict(snapshot.prompts)
    if model is not None:
        if model not in snapshot.models:
            raise ValueError(_unknown("--model", "model", model, snapshot.models))
        prompts[side.prompt] = prompts[side.prompt].model_copy(update={"model": model})
    return snapshot.model_copy(
        update={
            "agent": snapshot.agent.model_copy(update={"side_a": side}),
            "prompts": prompts,
        }
    )


def _definitions(
    given: Definitions | str | Path | Mapping[str, str], source: DefinitionSnapshot
) -> Definitions:
    if isinstance(given, Definitions):
        return given
    if isinstance(given, Mapping):
        return uploaded_definitions(given, source)
    return _load(given)


def _load(folder: str | Path) -> Definitions:
    if not Path(folder).is_dir():
        raise ValueError(f"--definitions: {folder} is not a folder")
    try:
        return load_directory(folder)
    except DefinitionError as err:
        raise ValueError(f"--definitions: {err}") from None


def _unknown(flag: str, kind: str, name: str, known: Collection[str]) -> str:
    return (
        f"{flag}: the fork's definitions have no {kind} {name!r} "
        f"(they have: {', '.join(sorted(known)) or 'none'}; give --definitions for others)"
    )


def _content_id(snapshot: DefinitionSnapshot) -> str:
    """A changed snapshot's id: the hash of its content, like every snapshot's."""
    data = snapshot.model_dump(mode="json", by_alias=True, exclude={"snapshot_id"})
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return f"fork-{digest[:32]}"


def uploaded_definitions(documents: Mapping[str, str], source: DefinitionSnapshot) -> Definitions:
    """A definitions set from YAML (or JSON) documents by their path in a folder
    (`agents/critic.yaml`), loaded and validated as the worker loads its folder; a problem
    is a `DefinitionError` naming the path and the field. Prompts may name the function
    tools of the source's snapshot, which an upload cannot carry (they are Python)."""
    if not documents:
        raise DefinitionError("definitions", None, "is empty; give at least an agent")
    for path in documents:
        if not _UPLOADED_PATH.match(path):
            raise DefinitionError(path, None, _not_uploadable(path))
    with tempfile.TemporaryDirectory(prefix="weft-fork-definitions-") as root:
        for path, text in documents.items():
            file = Path(root, path)
            file.parent.mkdir(exist_ok=True)
            file.write_text(text, encoding="utf-8")
        definitions = load_directory(root)
    definitions.root = None  # the folder is gone; an upload defines no MCP server to run
    for spec in source.tools.values():
        if spec.kind == "function" and not spec.builtin and spec.name not in definitions.tools:
            definitions.add(_source_tool(spec), source=f"tool {spec.name!r} (the source's)")
    definitions.validate()
    return definitions


def _not_uploadable(path: str) -> str:
    kinds = ", ".join(f"{kind}/NAME.yaml" for kind in UPLOADABLE_KINDS)
    if path.endswith(".py"):
        return (
            "Python definitions (tools, hooks, effects) run code in the worker and are not "
            f"accepted over HTTP; give {kinds} (prompts may name the source's tools)"
        )
    return f"not a definition path that may be uploaded; give {kinds}"


def _source_tool(spec: ToolSpec) -> FunctionTool:
    """The source's function tool as the fork's definitions see it: its spec as the model
    saw it. The worker runs the tool by name, so this stand-in never executes."""

    class Arguments(BaseModel):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return spec.parameters

    def execute(state: object, args: BaseModel) -> None:
        raise RuntimeError(f"tool {spec.name!r} runs in the worker, not in a fork's definitions")

    return FunctionTool(
        name=spec.name, description=spec.description, args=Arguments, execute=execute
    )
