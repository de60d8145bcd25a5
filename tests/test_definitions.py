"""Definitions load from a directory, validate across files, and fail naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from weft.definitions import DefinitionError, load_directory

DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo" / "definitions"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


VALID = {
    "models/m.yaml": "provider: scripted\nmodel: x\n",
    "prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\n",
    "agents/a.yaml": "sideA:\n  prompt: p\n",
}


def test_demo_definitions_load_and_validate():
    """The shipped demo definitions load and pass validation."""
    definitions = load_directory(DEMO)
    definitions.validate(providers=["scripted"])
    snapshot = definitions.snapshot("travel_assistant")
    assert set(snapshot.tools) == {"get_weather", "packing_advisor", "packing_list"}
    assert snapshot.tools["packing_advisor"].kind == "prompt"
    assert snapshot.tools["get_weather"].parameters["required"] == ["city"]
    # mcp_servers/travel_notes.py is the MCP server's program, not a function tool.
    assert snapshot.mcp_servers["travel_notes"].args == ["mcp_servers/travel_notes.py"]


def test_snapshot_is_stable_and_content_addressed(tmp_path):
    """The same definitions give the same snapshot id; an edit gives a new one."""
    root = _tree(tmp_path, VALID)
    first = load_directory(root).snapshot("a").snapshot_id
    assert load_directory(root).snapshot("a").snapshot_id == first
    (root / "prompts/p.yaml").write_text("toolDescription: d\nmodel: m\nprompt: changed\n")
    assert load_directory(root).snapshot("a").snapshot_id != first


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        (
            {"prompts/p.yaml": "toolDescription: d\nmodel: nope\nprompt: hi\n"},
            "prompts/p.yaml: model: unknown model 'nope'",
        ),
        (
            {"prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\ntools: [serch]\n"},
            "prompts/p.yaml: tools[0]: unknown tool 'serch'",
        ),
        (
            {"agents/a.yaml": "sideA:\n  prompt: missing\n"},
            "agents/a.yaml: sideA.prompt: unknown prompt 'missing'",
        ),
        (
            {"models/m.yaml": "provider: scripted\nmodel: x\nfallbacks: [ghost]\n"},
            "models/m.yaml: fallbacks[0]: unknown model 'ghost'",
        ),
        (
            {"models/m.yaml": "provider: nowhere\nmodel: x\n"},
            "models/m.yaml: provider: unknown provider 'nowhere'",
        ),
        ({"agents/a.yaml": "type: dual_ai\nsideA:\n  prompt: p\n"}, "sideB is required"),
        ({"agents/a.yaml": "sideA:\n  prompt: p\n  maxSteps: many\n"}, "field 'sideA.maxSteps'"),
        (
            {"agents/a.yaml": "name: other\nsideA:\n  prompt: p\n"},
            "agents/a.yaml: name: 'other' differs from the file stem",
        ),
        ({"agents/a.yaml": "sideA: [unclosed\n"}, "agents/a.yaml: invalid YAML"),
        (
            {"tools/t.py": "raise RuntimeError('broken import')\n"},
            "tools/t.py: failed to import: RuntimeError: broken import",
        ),
        ({"tools/t.py": "x = 1\n"}, "tools/t.py: must define exactly one tool"),
    ],
)
def test_bad_definitions_name_file_and_field(tmp_path, files, fragment):
    """Each broken definition raises a DefinitionError naming the file and the field."""
    root = _tree(tmp_path, {**VALID, **files})
    with pytest.raises(DefinitionError) as caught:
        load_directory(root).validate(providers=["scripted"])
    assert fragment in str(caught.value)


RESERVED_TOOL = """
from pydantic import BaseModel

from weft.definitions import define_tool


class Args(BaseModel):
    ref: str


def read(state, args):
    return "mine"


tool = define_tool(description="shadows weft's reader", args=Args, execute=read)
"""
RESERVED = "the name 'read_output' is reserved for weft's built-in output reader"


@pytest.mark.parametrize(
    ("files", "where"),
    [
        ({"tools/read_output.py": RESERVED_TOOL}, "tools/read_output.py: name: "),
        (
            {"prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\ntools: [read_output]\n"},
            "prompts/p.yaml: tools[0]: ",
        ),
        (
            {"agents/a.yaml": "sideA:\n  prompt: p\n  sessionStop: read_output\n"},
            "agents/a.yaml: sideA.sessionStop: ",
        ),
    ],
)
def test_read_output_is_a_reserved_tool_name(tmp_path, files, where):
    """A tool of the user's named `read_output` would shadow the preview reader: refused."""
    root = _tree(tmp_path, {**VALID, **files})
    with pytest.raises(DefinitionError) as caught:
        load_directory(root).validate(providers=["scripted"])
    assert where + RESERVED in str(caught.value)


def test_worker_refuses_bad_definitions(tmp_path):
    """`weft worker` exits at start-up with one line naming the bad file and field."""
    import subprocess
    import sys

    root = _tree(
        tmp_path / "defs",
        {**VALID, "prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\ntools: [serch]\n"},
    )
    config = tmp_path / "weft.yml"
    config.write_text(
        f"definitions: {root}\nstore:\n  url: sqlite:///{tmp_path / 'w.db'}\n"
        "providers:\n  scripted: {kind: scripted}\n"
        "temporal:\n  address: 127.0.0.1:1\n"
    )
    weft = Path(sys.executable).parent / "weft"
    done = subprocess.run(
        [str(weft), "--config", str(config), "worker"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "prompts/p.yaml: tools[0]: unknown tool 'serch'" in done.stderr
    assert "Traceback" not in done.stderr
