"""Declared variables: what resolves a required one, and how thread values are typed."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.definitions.api import define_tool
from weft.definitions.variables import MissingVariable, thread_env


class _Args(BaseModel):
    q: str


def _definitions(*, agent_env: dict[str, str] | None = None, **prompt: object) -> Definitions:
    return Definitions().add(
        define_model(name="m", provider="scripted", model="x"),
        define_prompt(
            name="p", toolDescription="d", model="m", prompt="hi", tools=["search"], **prompt
        ),
        define_agent(name="a", sideA={"prompt": "p"}, env=agent_env or {}),
        define_tool(
            name="search",
            description="search",
            args=_Args,
            execute=lambda state, args: None,
            variables=[{"name": "API_KEY", "required": True}],
        ),
        source=None,
    )


def _env(definitions: Definitions, env: dict[str, object]) -> dict[str, object]:
    return thread_env(definitions, definitions.snapshot("a"), env)


def test_a_function_tools_required_variable_must_resolve() -> None:
    """A required variable of a tool the prompt offers stops the thread when unset."""
    with pytest.raises(MissingVariable) as caught:
        _env(_definitions(), {})
    assert str(caught.value).startswith(
        "tool 'search' (Python): variables.API_KEY: required variable 'API_KEY' is not set"
    )


def test_required_variables_resolve_from_thread_agent_or_prompt_env() -> None:
    """The thread's env, the agent's `env` and the prompt's `env` each satisfy it."""
    assert _env(_definitions(), {"API_KEY": "k"}) == {"API_KEY": {"value": "k", "type": "secret"}}
    assert _env(_definitions(agent_env={"API_KEY": "k"}), {}) == {}
    assert _env(_definitions(env={"API_KEY": "k"}), {}) == {}


def test_an_empty_value_does_not_count() -> None:
    """A required variable set to an empty string is as missing as an absent one."""
    with pytest.raises(MissingVariable):
        _env(_definitions(), {"API_KEY": {"value": "", "type": "secret"}})


def test_thread_values_take_the_declared_type_unless_typed() -> None:
    """A plain value of a declared variable takes its type; a typed one keeps its own;
    undeclared values stay as given."""
    definitions = _definitions(variables={"CITY": {"type": "text"}})
    env = _env(
        definitions,
        {"API_KEY": "k", "CITY": "Paris", "OTHER": "x", "TYPED": {"value": 1, "type": "text"}},
    )
    assert env == {
        "API_KEY": {"value": "k", "type": "secret"},
        "CITY": {"value": "Paris", "type": "text"},
        "OTHER": "x",
        "TYPED": {"value": 1, "type": "text"},
    }


def test_variables_accept_the_spec_list_and_a_mapping() -> None:
    """`variables` is the spec's list of {name, ...} or a mapping by name; twice is an error."""
    listed = define_prompt(
        name="p", toolDescription="d", model="m", prompt="x", variables=[{"name": "A"}]
    )
    mapped = define_prompt(
        name="p", toolDescription="d", model="m", prompt="x", variables={"A": {}}
    )
    assert listed.variables == mapped.variables
    with pytest.raises(ValueError, match="'A' is declared twice"):
        define_prompt(
            name="p",
            toolDescription="d",
            model="m",
            prompt="x",
            variables=[{"name": "A"}, {"name": "A"}],
        )
