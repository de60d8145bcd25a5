"""Definitions for prompt-tool scenarios: an agent whose prompt lists the `advisor` prompt,
which may list the `deep` prompt in turn; each prompt has a scripted model of its own."""

from __future__ import annotations

from typing import Any

from support import agent_definitions

from weft.definitions import Definitions, define_model, define_prompt


def prompt_tool_definitions(
    main: str,
    advisor: str,
    *,
    entry: dict[str, Any] | None = None,
    advisor_fields: dict[str, Any] | None = None,
    deep: str | None = None,
    deep_fields: dict[str, Any] | None = None,
) -> Definitions:
    """`helper` (model script `main`) lists `advisor` (script `advisor`) as a prompt tool,
    with the entry fields `entry`; with `deep`, `advisor` lists the `deep` prompt too."""
    advisor_tools: list[Any] = ["weather", "explode", "ask_human"]
    if deep is not None:
        advisor_tools.append("deep")
    definitions = agent_definitions(
        main, tools=["weather", "note", {"name": "advisor", **(entry or {})}]
    ).add(
        define_model(name="advisor_model", provider="scripted", model=advisor),
        define_prompt(
            name="advisor",
            toolDescription="Asks the advisor, who checks facts with tools.",
            model="advisor_model",
            prompt="You are the advisor.",
            **{"tools": advisor_tools, **(advisor_fields or {})},
        ),
    )
    if deep is not None:
        definitions.add(
            define_model(name="deep_model", provider="scripted", model=deep),
            define_prompt(
                name="deep",
                toolDescription="Goes deeper.",
                model="deep_model",
                prompt="You are the deep thinker.",
                tools=["note"],
                **(deep_fields or {}),
            ),
        )
    return definitions
