"""Prompt tools in definitions: accepted and snapshotted, or refused naming the files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from weft.definitions import DefinitionError, load_directory

BASE = {
    "models/m.yaml": "provider: scripted\nmodel: x\n",
    "models/sub-model.yaml": "provider: scripted\nmodel: y\nfallbacks: [spare]\n",
    "models/spare.yaml": "provider: scripted\nmodel: z\n",
    "agents/a.yaml": "sideA:\n  prompt: main\n",
}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {**BASE, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _prompt(tools: str, model: str = "m", extra: str = "") -> str:
    return f"toolDescription: does its part\nmodel: {model}\nprompt: hi\ntools: {tools}\n{extra}"


def _refusal(tmp_path: Path, files: dict[str, str]) -> str:
    with pytest.raises(DefinitionError) as caught:
        load_directory(_tree(tmp_path, files)).validate(providers=["scripted"])
    return str(caught.value)


def test_prompt_tool_is_snapshotted_with_its_prompt_model_and_tools(tmp_path):
    """A listed prompt becomes a `prompt` tool (its toolDescription, the mapped arguments);
    its prompt, model with fallbacks and tools, and theirs in turn, join the snapshot."""
    root = _tree(
        tmp_path,
        {
            "prompts/main.yaml": _prompt(
                "[{name: helper, initUserMessageProperty: question, "
                "initAttachmentsProperty: files, includeToolCalls: false}]"
            ),
            "prompts/helper.yaml": _prompt("[ask_human, deeper]", model="sub-model"),
            "prompts/deeper.yaml": _prompt("[]", extra="includeChat: true\n"),
        },
    )
    definitions = load_directory(root)
    definitions.validate(providers=["scripted"])
    snapshot = definitions.snapshot("a")
    assert set(snapshot.prompts) == {"main", "helper", "deeper"}
    assert set(snapshot.models) == {"m", "sub-model", "spare"}
    assert set(snapshot.tools) == {"helper", "ask_human", "deeper"}
    spec = snapshot.tools["helper"]
    assert (spec.kind, spec.target, spec.builtin) == ("prompt", "helper", True)
    assert spec.description == "does its part"
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": "the request for this tool (its first message)",
            },
            "files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "paths of files in this thread the request refers to",
            },
        },
        "required": ["question"],
    }
    assert snapshot.tools["deeper"].parameters["required"] == ["message"]


@pytest.mark.parametrize(
    ("files", "fragments"),
    [
        (
            {"prompts/main.yaml": _prompt("[main]")},
            [
                "prompts/main.yaml: tools: prompt tools form a cycle: main (prompts/main.yaml) → "
                "main (prompts/main.yaml)"
            ],
        ),
        (
            {
                "prompts/main.yaml": _prompt("[one]"),
                "prompts/one.yaml": _prompt("[two]"),
                "prompts/two.yaml": _prompt("[three]"),
                "prompts/three.yaml": _prompt("[one]"),
            },
            [
                "prompts/one.yaml: tools: prompt tools form a cycle: one (prompts/one.yaml) → "
                "two (prompts/two.yaml) → three (prompts/three.yaml) → one (prompts/one.yaml)"
            ],
        ),
    ],
    ids=["itself", "three_deep"],
)
def test_a_cycle_of_prompt_tools_is_refused(tmp_path, files, fragments):
    """A prompt that reaches itself through prompt tools is refused, naming every file."""
    refusal = _refusal(tmp_path, files)
    for fragment in fragments:
        assert fragment in refusal


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        (
            {
                "prompts/main.yaml": _prompt("[{name: helper, blocking: true}]"),
                "prompts/helper.yaml": _prompt("[]"),
            },
            "prompts/main.yaml: tools[0]: prompt tool 'helper': field 'blocking': Extra inputs "
            "are not permitted",
        ),
        (
            {
                "prompts/main.yaml": _prompt("[{name: helper, includeErrors: maybe}]"),
                "prompts/helper.yaml": _prompt("[]"),
            },
            "prompts/main.yaml: tools[0]: prompt tool 'helper': field 'includeErrors'",
        ),
        (
            {
                "prompts/main.yaml": _prompt("[helper]"),
                "prompts/helper.yaml": _prompt("[]"),
                "tools/helper.py": "from pydantic import BaseModel\n"
                "from weft.definitions import define_tool\n"
                "class A(BaseModel):\n    x: int\n"
                "tool = define_tool(description='d', args=A, execute=lambda s, a: 1)\n",
            },
            "prompts/main.yaml: tools[0]: 'helper' is ambiguous: it is a prompt "
            "(prompts/helper.yaml) and a function tool (tools/helper.py); rename one of them",
        ),
        (
            {
                "prompts/main.yaml": _prompt("[helper]"),
                "prompts/helper.yaml": _prompt("[kid]"),
                "prompts/kid_prompt.yaml": _prompt("[]"),
                "agents/kid.yaml": "type: dual_ai\nexposeAsTool: true\n"
                "sideA: {prompt: kid_prompt}\nsideB: {prompt: kid_prompt}\n",
            },
            "prompts/helper.yaml: tools[0]: 'kid' is an agent, but prompt 'helper' runs as a "
            "prompt tool (listed by prompts/main.yaml); agent tools (subagents, handoffs) "
            "cannot run inside a prompt tool",
        ),
        (
            {
                "prompts/main.yaml": _prompt("[helper, other]"),
                "prompts/other.yaml": _prompt("[{name: helper, initUserMessageProperty: q}]"),
                "prompts/helper.yaml": _prompt("[]"),
            },
            "prompts/other.yaml: tools: prompt tool 'helper' maps its arguments differently",
        ),
    ],
    ids=["extra_key", "bad_flag", "also_a_function_tool", "agent_inside", "two_mappings"],
)
def test_bad_prompt_tool_entries_are_refused(tmp_path, files, fragment):
    """Each bad prompt-tool definition is refused naming the file and the field."""
    assert fragment in _refusal(tmp_path, files)


def test_worker_refuses_a_cycle_at_start_up(tmp_path):
    """`weft worker` exits at start-up naming the files of every prompt in the cycle."""
    root = _tree(
        tmp_path / "defs",
        {"prompts/main.yaml": _prompt("[ping]"), "prompts/ping.yaml": _prompt("[main]")},
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
    assert (
        "prompts/main.yaml: tools: prompt tools form a cycle: main (prompts/main.yaml) → "
        "ping (prompts/ping.yaml) → main (prompts/main.yaml)"
    ) in done.stderr
    assert "Traceback" not in done.stderr
