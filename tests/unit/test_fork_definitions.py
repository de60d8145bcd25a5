"""The definitions a fork runs on: the source's snapshot with `--model` / `--prompt` changed,
or a snapshot from other definitions; unknown names are refused naming the flag."""

from __future__ import annotations

import pytest

from weft.client.fork_definitions import fork_snapshot
from weft.definitions import Definitions, define_agent, define_model, define_prompt


def _definitions() -> Definitions:
    """An agent whose prompt's model falls back to a second model; a second prompt is a tool."""
    return Definitions().add(
        define_model(name="fast", provider="scripted", model="a", fallbacks=["slow"]),
        define_model(name="slow", provider="scripted", model="b"),
        define_prompt(
            name="helper_prompt",
            toolDescription="helps",
            model="fast",
            prompt="Help.",
            tools=["critic"],
        ),
        define_prompt(name="critic", toolDescription="critic", model="slow", prompt="Criticise."),
        define_agent(name="helper", sideA={"prompt": "helper_prompt"}),
    )


def test_model_and_prompt_overrides_make_a_new_snapshot() -> None:
    """`model` changes the side's prompt's model, `prompt` the side's prompt, with a new id."""
    source = _definitions().snapshot("helper")

    slower = fork_snapshot(source, model="slow")
    assert slower.prompts["helper_prompt"].model == "slow"
    assert slower.snapshot_id != source.snapshot_id
    assert source.prompts["helper_prompt"].model == "fast"  # the source's is untouched

    critic = fork_snapshot(source, prompt="critic")
    assert critic.agent.side_a.prompt == "critic"
    assert fork_snapshot(source) is source
    assert fork_snapshot(source, model="slow").snapshot_id == slower.snapshot_id


def test_unknown_names_are_refused_naming_the_flag() -> None:
    """A model, prompt or agent the fork's definitions lack is one error naming its flag."""
    source = _definitions().snapshot("helper")
    with pytest.raises(ValueError, match=r"--model: .*no model 'huge' \(they have: fast, slow"):
        fork_snapshot(source, model="huge")
    with pytest.raises(ValueError, match=r"--prompt: .*no prompt 'nope'"):
        fork_snapshot(source, prompt="nope")
    with pytest.raises(ValueError, match=r"--agent: 'other' is not the source's agent"):
        fork_snapshot(source, agent="other")
    with pytest.raises(ValueError, match=r"--definitions: .* is not a folder"):
        fork_snapshot(source, definitions="/nonexistent/defs")
    with pytest.raises(ValueError, match=r"--agent: "):
        fork_snapshot(source, agent="nobody", definitions=_definitions())
