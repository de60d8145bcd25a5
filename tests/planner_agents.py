"""The planner of the task-tool tests: an agent with the `tasks` tools and a `writer`
subagent exposed as a tool, both answering from one scripted model."""

from __future__ import annotations

from weft.definitions import Definitions, define_agent, define_model, define_prompt


def planner_definitions(script: str) -> Definitions:
    """`planner` (tools: `tasks`, `writer`) and `writer`, on the scripted model `script`."""
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="planner_prompt",
            toolDescription="plans",
            model="scripted",
            prompt="You plan work as tasks.",
            tools=["tasks", "writer"],
        ),
        define_prompt(
            name="writer_prompt", toolDescription="writes", model="scripted", prompt="You write."
        ),
        define_agent(name="planner", sideA={"prompt": "planner_prompt"}),
        define_agent(
            name="writer",
            exposeAsTool=True,
            toolDescription="Writes.",
            sideA={"prompt": "writer_prompt"},
        ),
    )
