"""Subagents (Runtime §7, §8, §10): tool configs, the registry, and child-to-parent reports.

A subagent is a `dual_ai` agent run as a child `AgentThread` workflow. The parent keeps
the registry in its workflow state (and the store projects it from `subagent.*` events);
the child reaches its parent only through the `subagent_report` signal.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from weft.contract.wire import CamelModel

# Signals between threads: public names, like the rest of the control plane.
SIGNAL_SUBAGENT_REPORT = "subagent_report"
SIGNAL_VARIABLES_PROVIDED = "variables_provided"

# Lifecycle tools the runtime adds to a prompt that has resumable subagents (§7.2).
SUBAGENT_CREATE_TOOL = "subagent_create"
SUBAGENT_MESSAGE_TOOL = "subagent_message"

# Tool-result error codes a parent model can act on.
ERROR_MAX_INSTANCES = "max_instances_reached"
ERROR_VARIABLES_REQUIRED = "scoped_variables_required"
ERROR_SUBAGENT_FAILED = "subagent_failed"
ERROR_UNKNOWN_SUBAGENT = "unknown_subagent"

SubagentStatus = Literal["starting", "running", "idle", "completed", "failed", "terminated"]
ParentCommunication = Literal["implicit", "explicit"]

# The argument that carries the initial message when the config maps none.
DEFAULT_MESSAGE_PROPERTY = "message"


class ResumableConfig(CamelModel):
    """`resumable` in object form: a child that stays idle between messages."""

    receives_messages: Literal["side_a", "side_b"] = "side_a"
    max_instances: int | None = Field(default=None, ge=1)
    parent_communication: ParentCommunication = "implicit"


class ImmediateConfig(CamelModel):
    """`immediate` in object form (§7.3/§7.4).

    `nameEnv`/`descriptionEnv` name env values used as the child's display name and
    description (model-visible hints); `scopedEnv` names env values handed to the child at
    runtime only: never in prompt text, encrypted at rest.
    """

    name_env: str | None = None
    description_env: str | None = None
    scoped_env: list[str] = Field(default_factory=list)


class SubagentToolConfig(CamelModel):
    """A prompt's tool entry that names a `dual_ai` agent (Standard Agents "subagent config")."""

    model_config = CamelModel.model_config | {"extra": "forbid"}

    name: str = Field(min_length=1)
    blocking: bool = True
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None
    init_agent_name_property: str | None = None
    immediate: bool | ImmediateConfig = False
    optional: str | None = Field(default=None, description="env flag enabling the subagent")
    resumable: Literal[False] | ResumableConfig = False
    scoped_env: list[str] = Field(
        default_factory=list,
        description="weft: env values the child requires, transferred as scoped (runtime-only) "
        "env; missing ones start the §7.5 bootstrap flow",
    )
    env: dict[str, Any] | None = None
    options: dict[str, Any] | None = None

    @field_validator("resumable", mode="before")
    @classmethod
    def _true_is_defaults(cls, value: Any) -> Any:
        return {} if value is True else value

    def message_property(self) -> str:
        return self.init_user_message_property or DEFAULT_MESSAGE_PROPERTY

    def immediate_config(self) -> ImmediateConfig | None:
        if self.immediate is False:
            return None
        return self.immediate if isinstance(self.immediate, ImmediateConfig) else ImmediateConfig()

    def required_scoped_env(self) -> list[str]:
        """Every env name the child must receive, in order, without repeats."""
        names = [*self.scoped_env]
        immediate = self.immediate_config()
        if immediate is not None:
            names += immediate.scoped_env
        return list(dict.fromkeys(names))


class HandoffToolConfig(CamelModel):
    """A prompt's tool entry that names an `ai_human` agent: calling it hands the thread over."""

    model_config = CamelModel.model_config | {"extra": "forbid"}

    name: str = Field(min_length=1)
    init_user_message_property: str | None = None
    env: dict[str, Any] | None = None
    options: dict[str, Any] | None = None


class SpawnRequest(CamelModel):
    """What a subagent is started with. A deferred one (§7.5) waits in this form, in the
    parent's state, until its scoped variables are stored under `scoped_env_request`."""

    config: SubagentToolConfig
    name: str
    tool: str = Field(description="the parent's tool that creates it")
    message: str | None = None
    attachments: list[str] = Field(default_factory=list)
    description: str | None = None
    tool_call_id: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    scoped_env_request: str | None = None


class RegistryEntry(CamelModel):
    """One child in the parent's subagent registry (§7.1 fields first, then weft's)."""

    reference: str = Field(description="the child's thread id (its workflow id)")
    name: str
    description: str | None = None
    resumable: bool
    blocking: bool
    status: SubagentStatus
    parent_communication: ParentCommunication
    created_at: str
    agent: str
    tool: str = Field(description="the parent's tool that created it")
    tool_call_id: str | None = None
    receives_messages: Literal["side_a", "side_b"] = "side_a"
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="the creating call's arguments (the child's `arguments`)"
    )
    status_note: str | None = Field(default=None, description="the last sessionStatus text")
    last_result: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict, description="the child's totals")
    closed: bool = Field(default=False, description="the child thread has ended")
    updated_at: str | None = None


class ParentLink(CamelModel):
    """Who started this thread as a subagent, and how the child must report back."""

    thread_id: str
    tool_call_id: str | None = None
    name: str | None = None
    description: str | None = None
    tool: str | None = None
    resumable: bool = False
    blocking: bool = True
    parent_communication: ParentCommunication = "implicit"
    snapshot_id: str | None = Field(
        default=None, description="the parent's definitions (its after_subagent_created hooks)"
    )
    hooks: list[str] = Field(
        default_factory=list,
        description="the parent's after_subagent_created hook ids in scope when it spawned",
    )


class SubagentReport(CamelModel):
    """The `subagent_report` signal: a child tells its parent what happened (§8.2, §8.3).

    - `status`: `sessionStatus` or `state.set_status` (the child keeps running);
    - `notify`: `state.notify_parent(content)`, always queued to the parent;
    - `completed` / `failed`: a session ended (sessionStop / sessionFail or a limit);
    - `closed`: the child thread ended (terminated, or done after its terminal payload).

    Attachments are paths in the **parent's** filesystem: the child copies them first.
    """

    reference: str = Field(min_length=1, max_length=512)
    kind: Literal["status", "notify", "completed", "failed", "closed"]
    report_id: str = Field(min_length=1, max_length=512, description="deduplicates retries")
    status: str | None = Field(default=None, max_length=4096)
    content: str | None = Field(default=None, max_length=256 * 1024)
    attachments: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)


class VariablesProvided(CamelModel):
    """The `variables_provided` signal: the §7.5 gateway stored values for a request."""

    request_id: str = Field(min_length=1, max_length=512)


class VariableRequest(CamelModel):
    """A deferred `subagent_create` waiting for scoped variables (§7.5); never holds values."""

    request_id: str
    parent_thread_id: str
    tool_call_id: str | None = None
    subagent: str = Field(description="the agent the deferred child runs")
    name: str
    missing: list[str]
    status: Literal["pending", "provided"] = "pending"
    created_at: str | None = None


# The activity that records a VariableRequest (input `VariableRequest`, no result), so the
# §7.5 gateway can serve it.
ACTIVITY_VARIABLES_REQUEST = "variables.request"
