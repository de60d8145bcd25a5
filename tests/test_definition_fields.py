"""Every definition field does something or is refused at start-up, naming file and field."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from weft.contract.actions import AskHumanOptions
from weft.contract.definitions import AgentDef, ModelDef, PromptDef
from weft.contract.hooks import HookSpec
from weft.contract.mcp import McpServerDef
from weft.contract.prompt_tools import PromptToolConfig
from weft.contract.subagents import HandoffToolConfig, SubagentToolConfig
from weft.contract.wire import CamelModel
from weft.definitions import DefinitionError, load_directory
from weft.definitions.api import FunctionHook, FunctionTool, define_hook, define_tool
from weft.definitions.field_support import FIELDS, Implemented, Refused

ROOT = Path(__file__).resolve().parents[1]

# Every definition model a file or a Python definition can fill, by its root.
ROOTS: tuple[type[BaseModel], ...] = (
    AgentDef,
    PromptDef,
    ModelDef,
    SubagentToolConfig,
    HandoffToolConfig,
    PromptToolConfig,
    AskHumanOptions,
    HookSpec,
    McpServerDef,
)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names, through unions, lists and dicts."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def model_field_keys(roots: tuple[type[BaseModel], ...]) -> set[str]:
    """`Model.camelName` for every field of the roots and every model they nest."""
    keys: set[str] = set()
    pending, seen = list(roots), set()
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            keys.add(f"{model.__name__}.{info.alias or name}")
            pending += _models_in(info.annotation)
    return keys


def python_keys() -> set[str]:
    """`define_tool.x` / `define_hook.x` for every keyword and every field they build."""
    keys = set()
    for prefix, function, built in (
        ("define_tool", define_tool, FunctionTool),
        ("define_hook", define_hook, FunctionHook),
    ):
        keys |= {f"{prefix}.{p}" for p in inspect.signature(function).parameters}
        keys |= {f"{prefix}.{f.name}" for f in dataclasses.fields(built)}
    return keys


def test_every_definition_field_has_a_row():
    """No field of a definition model, define_tool or define_hook is missing from the table."""
    missing = (model_field_keys(ROOTS) | python_keys()) - FIELDS.keys()
    assert not missing, f"add these to definitions/field_support.py: {sorted(missing)}"


def test_the_walk_sees_a_planted_field():
    """A field added to a model nested in a list of a union is found missing: the guard bites."""

    class Shade(CamelModel):
        tint: str

    class Planted(CamelModel):
        shades: list[Shade] | None = None

    missing = model_field_keys((Planted,)) - FIELDS.keys()
    assert missing == {"Planted.shades", "Shade.tint"}


def test_every_row_names_a_real_field():
    """The table holds no row for a field that does not exist (a renamed one, say)."""
    stale = FIELDS.keys() - (model_field_keys(ROOTS) | python_keys())
    assert not stale


@pytest.mark.parametrize(
    "key", sorted(k for k, v in FIELDS.items() if isinstance(v, Implemented)), ids=str
)
def test_implemented_rows_point_at_code_that_reads_the_field(key):
    """An implemented row names a module that exists and mentions the field."""
    row = FIELDS[key]
    assert isinstance(row, Implemented)
    path = ROOT / row.where
    assert path.is_file(), f"{key}: {row.where} does not exist"
    field = key.split(".", 1)[1]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in field)
    text = path.read_text()
    assert field in text or snake in text, f"{key}: {row.where} never mentions {field}"


# What SPEC-NOTES lists for each definition (copied: tests never read the shared spec folder), and the
# table key prefix each list lives under.
SPEC_FIELDS: dict[str, list[str]] = {
    "AgentDef": [
        "name",
        "sideA",
        "type",
        "sideB",
        "maxSessionTurns",
        "description",
        "title",
        "icon",
        "exposeAsTool",
        "toolDescription",
        "env",
        "hooks",
    ],
    "SideConfig": [
        "prompt",
        "label",
        "stopOnResponse",
        "stopTool",
        "stopToolResponseProperty",
        "maxSteps",
        "sessionStop",
        "sessionFail",
        "sessionStatus",
    ],
    "SessionTool": ["name", "messageProperty", "attachmentsProperty"],
    "PromptDef": [
        "name",
        "toolDescription",
        "prompt",
        "model",
        "includeChat",
        "includePastTools",
        "parallelToolCalls",
        "toolChoice",
        "requiredSchema",
        "variables",
        "env",
        "reasoning",
        "recentImageThreshold",
        "providerOptions",
        "hooks",
        "tools",
    ],
    "PromptPart": ["type", "content", "prompt", "property"],
    "ToolRef": ["name", "env", "options"],
    "PromptToolConfig": [
        "name",
        "includeTextResponse",
        "includeToolCalls",
        "includeErrors",
        "initUserMessageProperty",
        "initAttachmentsProperty",
    ],
    "SubagentToolConfig": [
        "name",
        "blocking",
        "initUserMessageProperty",
        "initAttachmentsProperty",
        "initAgentNameProperty",
        "immediate",
        "optional",
        "resumable",
    ],
    "ResumableConfig": ["receives_messages", "maxInstances", "parentCommunication"],
    "ImmediateConfig": ["nameEnv", "descriptionEnv", "scopedEnv"],
    "define_tool": ["description", "args", "execute", "variables"],
    "ModelDef": [
        "name",
        "provider",
        "model",
        "fallbacks",
        "inputPrice",
        "outputPrice",
        "cachedPrice",
        "providerOptions",
        "providerTools",
        "capabilities",
    ],
    "Capabilities": [
        "supportsImages",
        "supportsToolCalls",
        "supportsStreaming",
        "supportsJsonMode",
        "maxContextTokens",
        "maxOutputTokens",
        "reasoningLevels",
    ],
    "define_hook": ["hook", "id", "execute"],
    "HookSpec": ["hook", "id"],
}


@pytest.mark.parametrize("owner", sorted(SPEC_FIELDS))
def test_spec_notes_fields_are_all_in_the_table(owner):
    """Each field SPEC-NOTES lists for agents, sides, prompts, tools, models and hooks has a row."""
    python = owner.startswith("define_")
    keys = [f"{owner}.{name if python else to_camel(name)}" for name in SPEC_FIELDS[owner]]
    assert [k for k in keys if k not in FIELDS] == []


TOOL = """
from pydantic import BaseModel

from weft.definitions import define_tool


class Args(BaseModel):
    city: str


def run(state, args):
    return args.city


tool = define_tool(description="a tool", args=Args, execute=run{extra})
"""

BASE = {
    "models/m.yaml": "provider: scripted\nmodel: x\n",
    "prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\n",
    "agents/a.yaml": "sideA:\n  prompt: p\n",
    "tools/t.py": TOOL.format(extra=""),
    "agents/kid.yaml": (
        "type: dual_ai\nexposeAsTool: true\nsideA:\n  prompt: p\nsideB:\n  prompt: p\n"
    ),
    "agents/helper.yaml": "exposeAsTool: true\nsideA:\n  prompt: p\n",
}


def _caller(tool_entry: str) -> dict[str, str]:
    """A prompt whose only tool entry is `tool_entry` (YAML flow mapping)."""
    return {
        "prompts/caller.yaml": f"toolDescription: d\nmodel: m\nprompt: hi\ntools:\n  - {tool_entry}\n"
    }


# One definitions directory per refused row, and where the refusal must point.
REFUSED_CASES: dict[str, tuple[dict[str, str], str]] = {
    "ToolRef.env": (
        _caller("{name: t, env: {CITY: Paris}}"),
        "prompts/caller.yaml: tools[0].env: ",
    ),
    "ToolRef.options": (
        _caller("{name: t, options: {units: C}}"),
        "prompts/caller.yaml: tools[0].options: ",
    ),
    "VariableDef.scoped": (
        {"prompts/p.yaml": BASE["prompts/p.yaml"] + "variables:\n  - {name: KEY, scoped: true}\n"},
        "prompts/p.yaml: variables.KEY.scoped: ",
    ),
    "SubagentToolConfig.env": (
        _caller("{name: kid, env: {A: b}}"),
        "prompts/caller.yaml: tools[0].env: ",
    ),
    "SubagentToolConfig.options": (
        _caller("{name: kid, options: {a: 1}}"),
        "prompts/caller.yaml: tools[0].options: ",
    ),
    "HandoffToolConfig.env": (
        _caller("{name: helper, env: {A: b}}"),
        "prompts/caller.yaml: tools[0].env: ",
    ),
    "HandoffToolConfig.options": (
        _caller("{name: helper, options: {a: 1}}"),
        "prompts/caller.yaml: tools[0].options: ",
    ),
    "define_tool.side_effects": (
        {"tools/t.py": TOOL.format(extra=", side_effects=False")},
        "tools/t.py: side_effects: ",
    ),
}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_every_refused_row_has_a_case():
    """Each refused row is proven refused below (a new refused row needs a case)."""
    refused = {k for k, v in FIELDS.items() if isinstance(v, Refused)}
    assert refused == set(REFUSED_CASES)


@pytest.mark.parametrize("key", sorted(REFUSED_CASES))
def test_a_refused_field_set_in_a_file_is_refused(tmp_path, key):
    """Setting a refused field fails validation naming the file, the field and why."""
    files, where = REFUSED_CASES[key]
    row = FIELDS[key]
    assert isinstance(row, Refused)
    root = _tree(tmp_path / key, {**BASE, **files})
    with pytest.raises(DefinitionError) as caught:
        load_directory(root).validate(providers=["scripted"])
    assert str(caught.value) == f"{where}is not supported by this runtime version: {row.why}"


def test_a_refused_field_left_at_its_default_is_accepted(tmp_path):
    """Writing a refused field's default value (scoped: false, side_effects=True) is fine."""
    files = {
        "prompts/p.yaml": BASE["prompts/p.yaml"] + "variables:\n  - {name: KEY, scoped: false}\n",
        "tools/t.py": TOOL.format(extra=", side_effects=True"),
    }
    definitions = load_directory(_tree(tmp_path, {**BASE, **files}))
    definitions.validate(providers=["scripted"])
    assert definitions.prompts["p"].variables["KEY"].scoped is False
    assert definitions.tools["t"].side_effects is True


def test_an_unknown_key_on_a_function_tool_entry_is_refused(tmp_path):
    """A function tool entry keeps no stray keys (`tenvs`, typos): refused naming the key."""
    root = _tree(tmp_path, {**BASE, **_caller("{name: t, tenvs: {A: b}}")})
    with pytest.raises(DefinitionError) as caught:
        load_directory(root).validate(providers=["scripted"])
    assert str(caught.value).startswith("prompts/caller.yaml: tools[0].tenvs: is not a field")
    assert "not supported by this runtime version" in str(caught.value)


def test_ask_human_options_are_not_refused(tmp_path):
    """ask_human's own options are its configuration, not refused tool options."""
    root = _tree(tmp_path, {**BASE, **_caller("{name: ask_human, options: {timeoutSeconds: 5}}")})
    definitions = load_directory(root)
    definitions.validate(providers=["scripted"])
    assert definitions.prompts["caller"].tool_options("ask_human") == {"timeoutSeconds": 5}


TOOLLESS = "provider: scripted\nmodel: x\ncapabilities: {supportsToolCalls: false}\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"prompts/p.yaml": "toolDescription: d\nmodel: plain\nprompt: hi\ntools: [t]\n"},
            "prompts/p.yaml: tools: prompt 'p' (prompts/p.yaml) offers tools (t) but model "
            "'plain' (models/plain.yaml) sets capabilities.supportsToolCalls: false",
        ),
        (
            {
                "models/m.yaml": "provider: scripted\nmodel: x\nfallbacks: [plain]\n",
                "prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\ntools: [t]\n",
            },
            "model 'plain' (a fallback of 'm') (models/plain.yaml)",
        ),
        (
            {
                "prompts/p.yaml": "toolDescription: d\nmodel: plain\nprompt: hi\n",
                "agents/a.yaml": "sideA:\n  prompt: p\n  stopTool: done\n",
            },
            "agents/a.yaml: sideA.prompt: prompt 'p' (prompts/p.yaml) offers tools (done)",
        ),
    ],
)
def test_tools_on_a_model_that_cannot_call_them_are_refused(tmp_path, files, message):
    """supportsToolCalls: false refuses a prompt offering tools, naming both files."""
    root = _tree(tmp_path, {**BASE, "models/plain.yaml": TOOLLESS, **files})
    with pytest.raises(DefinitionError) as caught:
        load_directory(root).validate(providers=["scripted"])
    assert message in str(caught.value)


def test_a_toolless_model_serves_a_prompt_without_tools(tmp_path):
    """supportsToolCalls: false is fine for a prompt that offers no tools."""
    files = {
        "models/plain.yaml": TOOLLESS,
        "prompts/p.yaml": "toolDescription: d\nmodel: plain\nprompt: hi\n",
    }
    definitions = load_directory(_tree(tmp_path, {**BASE, **files}))
    definitions.validate(providers=["scripted"])
    capabilities = definitions.models["plain"].capabilities
    assert capabilities is not None and capabilities.supports_tool_calls is False
    assert definitions.prompts["p"].tools == []


def _run_worker(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    root = _tree(tmp_path / "defs", {**BASE, **files})
    config = tmp_path / "weft.yml"
    config.write_text(
        f"definitions: {root}\nstore:\n  url: sqlite:///{tmp_path / 'w.db'}\n"
        "providers:\n  scripted: {kind: scripted}\n"
        "temporal:\n  address: 127.0.0.1:1\n"
    )
    weft = Path(sys.executable).parent / "weft"
    return subprocess.run(
        [str(weft), "--config", str(config), "worker"], capture_output=True, text=True, timeout=60
    )


def test_worker_exits_on_an_unsupported_field(tmp_path):
    """`weft worker` on definitions that set a refused field exits 1 naming file and field."""
    done = _run_worker(tmp_path, _caller("{name: t, env: {CITY: Paris}}"))
    assert done.returncode == 1
    assert "prompts/caller.yaml: tools[0].env: is not supported by this runtime version" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_worker_exits_on_an_unknown_key(tmp_path):
    """`weft worker` on an agent file with a key no definition has exits 1 naming both."""
    done = _run_worker(tmp_path, {"agents/a.yaml": "sideA:\n  prompt: p\ncolour: teal\n"})
    assert done.returncode == 1
    assert "agents/a.yaml: field 'colour': Extra inputs are not permitted" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_docs_render_every_row():
    """docs/definitions-fields.md shows each row as the table holds it (no stale page)."""
    page = (ROOT / "docs" / "definitions-fields.md").read_text()
    for key, row in FIELDS.items():
        field = key.split(".", 1)[1]
        if isinstance(row, Implemented):
            line = f"| `{field}` | implemented | {row.how} (`{row.where}`) |"
        else:
            line = f"| `{field}` | **refused** | {row.why} |"
        assert line in page, f"{key}: regenerate the table in docs/definitions-fields.md"
