"""Hook definitions: hooks/<id>.py files and define_hook, with errors naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from weft.definitions import DefinitionError, define_hook, load_directory

MODEL = "provider: scripted\nmodel: m\n"
PROMPT = "toolDescription: t\nmodel: scripted\nprompt: Hi.\n"
HOOK = """
from weft.definitions import define_hook


def execute(state, data):
    return None


hook = define_hook(hook={hook!r}, execute=execute)
"""


def directory(tmp_path: Path, hooks: dict[str, str], agent_hooks: str = "[]") -> Path:
    """A definitions directory with one agent (listing `agent_hooks`) and hook files."""
    for folder, name, text in (
        ("models", "scripted.yaml", MODEL),
        ("prompts", "helper_prompt.yaml", PROMPT),
        ("agents", "helper.yaml", f"sideA: {{prompt: helper_prompt}}\nhooks: {agent_hooks}\n"),
    ):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / name).write_text(text)
    (tmp_path / "hooks").mkdir(exist_ok=True)
    for stem, point in hooks.items():
        (tmp_path / "hooks" / f"{stem}.py").write_text(HOOK.format(hook=point))
    return tmp_path


def test_a_hook_file_loads_under_its_stem_and_the_snapshot_freezes_it(tmp_path: Path) -> None:
    """hooks/audit.py becomes hook `audit`; a thread's snapshot records its point."""
    definitions = load_directory(
        directory(tmp_path, {"audit": "after_tool_call_success"}, "[audit]")
    )
    definitions.validate()
    assert definitions.hooks["audit"].hook == "after_tool_call_success"
    assert definitions.snapshot("helper").hooks["audit"].hook == "after_tool_call_success"


def test_an_unknown_hook_name_names_the_file_and_field(tmp_path: Path) -> None:
    """A hook file hooking a point that does not exist fails with its file and `hook`."""
    with pytest.raises(DefinitionError) as caught:
        load_directory(directory(tmp_path, {"audit": "after_everything"}))
    assert str(caught.value).startswith("hooks/audit.py: hook: unknown hook 'after_everything'")
    assert "after_tool_call_success" in str(caught.value)  # it lists the twelve


def test_a_hook_id_that_is_not_snake_case_is_refused(tmp_path: Path) -> None:
    """The file stem is the id and must be snake_case."""
    with pytest.raises(DefinitionError, match=r"hooks/Audit-Hook.py: id: .*snake_case"):
        load_directory(directory(tmp_path, {"Audit-Hook": "filter_messages"}))


def test_an_agent_naming_an_unknown_hook_names_its_file_and_index(tmp_path: Path) -> None:
    """Every id in an agent's hooks must be a defined hook; the error lists the known ones."""
    definitions = load_directory(
        directory(tmp_path, {"audit": "filter_messages"}, "[audit, missing]")
    )
    with pytest.raises(DefinitionError) as caught:
        definitions.validate()
    message = str(caught.value)
    assert message.startswith("agents/helper.yaml: hooks[1]: unknown hook 'missing'")
    assert "known hooks: audit" in message


def test_snapshots_without_hooks_keep_their_ids(tmp_path: Path) -> None:
    """Defining hooks that an agent does not name leaves its snapshot (and id) unchanged."""
    bare = load_directory(directory(tmp_path / "a", {}))
    hooked = load_directory(directory(tmp_path / "b", {"audit": "filter_messages"}))
    named = load_directory(directory(tmp_path / "c", {"audit": "filter_messages"}, "[audit]"))
    assert bare.snapshot("helper").snapshot_id == hooked.snapshot("helper").snapshot_id
    assert named.snapshot("helper").snapshot_id != bare.snapshot("helper").snapshot_id


def test_define_hook_checks_its_fields() -> None:
    """define_hook refuses an unknown point, a bad id and a non-callable execute."""
    with pytest.raises(DefinitionError, match="hook: unknown hook 'nope'"):
        define_hook(hook="nope", execute=lambda s, d: None, id="x")
    with pytest.raises(DefinitionError, match="id: 'Bad Id' must be snake_case"):
        define_hook(hook="filter_messages", execute=lambda s, d: None, id="Bad Id")
    with pytest.raises(DefinitionError, match="execute: must be callable"):
        define_hook(hook="filter_messages", execute="not code", id="x")  # type: ignore[arg-type]
