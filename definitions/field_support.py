"""Every field of every definition, and what this runtime does with it.

A field is implemented (the table says where) or refused: a definition that sets a refused
field to anything but its default is an error at start-up naming the file and the field.
`tests/test_definition_fields.py` walks the definition models, so a field added to a model
without a row here fails the tests. docs/definitions-fields.md renders this table.

Keys are `Model.camelName` for the pydantic models (the spelling YAML uses), and
`define_tool.<keyword>` / `define_hook.<keyword>` for what Python definitions pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Implemented:
    """The field does something: `where` is the module that honours it."""

    where: str
    how: str


@dataclass(frozen=True)
class Refused:
    """The field is refused when set: `why` says so and what to do instead."""

    why: str


Support = Implemented | Refused
_I, _R = Implemented, Refused

_LOADER = "definitions/loader.py"
_WINDOW = "activities/context_window.py"
_SNAPSHOT = "definitions/snapshot.py"
_VALIDATION = "definitions/validation.py"
_CAPABILITIES = "definitions/capabilities.py"
_API = "definitions/api.py"
_ACTIVE = "workflows/active_agent.py"
_ACTIONS = "contract/actions.py"
_GATE = "workflows/human_gate.py"
_CONTEXT = "activities/context.py"
_MODEL_STEP = "workflows/model_step.py"
_IMAGES = "activities/images.py"
_CATALOG = "contract/tool_catalog.py"
_REGISTRY = "workflows/subagents/registry.py"
_SUBAGENT_TYPES = "contract/subagents.py"
_TOOL_EXECUTE = "activities/tool_execute.py"
_TOOL_RUNNER = "workflows/tool_runner.py"
_OPENAI = "activities/providers/openai_chat.py"
_CONTEXT_LIMITS = "contract/context_tokens.py"
_STOP = "workflows/stop_rules.py"
_SUBAGENTS = "workflows/subagents/agent_tools.py"
_SPAWNER = "workflows/subagents/spawner.py"
_PERMISSIONS = "contract/permissions.py"
_BUDGETS = "contract/budget.py"
_MODEL_CALL = "activities/model_call.py"
_MODEL_REQUEST = "activities/model_request.py"
_MODEL_SUPPORT = "activities/model_support.py"
_VARIABLES = "definitions/variables.py"
_TOOL_SPECS = "definitions/tool_specs.py"
_HOOKS = "activities/hooks/runner.py"
_HOOK_SCOPE = "activities/hooks/registry.py"
_PROMPT_TOOLS = "workflows/prompt_tools.py"
_STRUCTURED = "activities/providers/definition_fields.py"
_SCHEMA_CHECKS = "definitions/schema_checks.py"
_SCOPED = "activities/scoped_window.py"
_READ = "workflows/read_models.py"
_MCP = "contract/mcp.py"
_MCP_POOL = "activities/mcp/pool.py"
_MCP_REACH = "activities/mcp/templating.py"
_MCP_CALLS = "activities/mcp/calls.py"
_MCP_LISTING = "activities/mcp/catalog_activity.py"
_MCP_ELICIT = "activities/mcp/elicitation.py"

_NO_TOOL_ENV = (
    "per-tool env values are not handed to the tool; put the value in the prompt's or the "
    "agent's `env` (or the thread's)"
)
_NO_TOOL_OPTIONS = (
    "static options are not passed to function tools; only the built-in ask_human takes "
    "`options` (timeoutSeconds, default)"
)
_NO_AGENT_ENV = (
    "env values on an agent tool entry are not handed to the child; the child inherits the "
    "parent's env, and `scopedEnv` lists runtime-only values it needs"
)
_NO_AGENT_OPTIONS = "an agent tool entry takes no static options"

FIELDS: dict[str, Support] = {
    # -- agents ----------------------------------------------------------------------------
    "AgentDef.name": _I(_LOADER, "the file stem; threads start by it"),
    "AgentDef.type": _I(_WINDOW, "dual_ai sides see each other as user"),
    "AgentDef.sideA": _I(_SNAPSHOT, "side A's prompt and stop rules"),
    "AgentDef.sideB": _I(_SNAPSHOT, "side B of a dual_ai agent"),
    "AgentDef.maxSessionTurns": _I(_STOP, "stop rule 4"),
    "AgentDef.description": _I(_READ, "thread_read agentInfo; the tool description fallback"),
    "AgentDef.title": _I(_READ, "thread_read agentInfo (weft thread show)"),
    "AgentDef.icon": _I(_READ, "thread_read agentInfo (weft thread show)"),
    "AgentDef.exposeAsTool": _I(_VALIDATION, "required to list it as a tool"),
    "AgentDef.toolDescription": _I(_TOOL_SPECS, "the agent tool's description"),
    "AgentDef.env": _I(_ACTIVE, "agent-level env defaults"),
    "AgentDef.hooks": _I(_HOOK_SCOPE, "hooks in scope when the prompt lists none"),
    "AgentDef.permissions": _I(_PERMISSIONS, "weft: tool permission rules and mode"),
    "AgentDef.budget": _I(
        "activities/thread_records.py", "weft: caps on the tree's spend (the stricter wins)"
    ),
    "AgentDef.definitionsPolicy": _I(
        "workflows/definitions_refresh.py",
        "weft: `latest` (newer definitions at the next turn) or `pinned` (until upgraded)",
    ),
    "AgentDef.retention": _I(
        "activities/retention.py", "weft: closed threads deleted after a TTL (docs/deletion.md)"
    ),
    "RetentionPolicy.closedThreadsTtl": _I(
        "contract/retention.py", "weft: how long after closing (the shorter of agent and tenant)"
    ),
    "SideConfig.prompt": _I(_ACTIVE, "the side's prompt"),
    "SideConfig.label": _I(_READ, "thread_read agentInfo.sides"),
    "SideConfig.stopOnResponse": _I(_STOP, "stop rule 2"),
    "SideConfig.stopTool": _I(_STOP, "stop rule 2"),
    "SideConfig.stopToolResponseProperty": _I(_STOP, "the argument that becomes the response"),
    "SideConfig.maxSteps": _I(_STOP, "stop rule 3, per side"),
    "SideConfig.sessionStop": _I(_STOP, "stop rule 1"),
    "SideConfig.sessionFail": _I(_STOP, "stop rule 1"),
    "SideConfig.sessionStatus": _I(_STOP, "updates the parent's registry status"),
    "SessionTool.name": _I(_TOOL_SPECS, "the lifecycle tool's name"),
    "SessionTool.messageProperty": _I(_STOP, "the argument handed to the parent as text"),
    "SessionTool.attachmentsProperty": _I(_STOP, "the argument whose files go to the parent"),
    "Budget.maxTokens": _I(_BUDGETS, "weft: input + output tokens of every attempt"),
    "Budget.maxCostUsd": _I(_BUDGETS, "weft: priced cost of every attempt"),
    "Budget.maxModelCalls": _I(_BUDGETS, "weft: model attempts, failed ones included"),
    "Budget.maxWallSeconds": _I(_BUDGETS, "weft: seconds since the root thread started"),
    "PermissionPolicy.mode": _I(_PERMISSIONS, "weft: default decision"),
    "PermissionPolicy.rules": _I(_PERMISSIONS, "weft: allow/ask/deny rules"),
    "PermissionPolicy.askTimeoutSeconds": _I(_PERMISSIONS, "weft: permission ask timeout"),
    "PermissionPolicy.onTimeout": _I(_PERMISSIONS, "weft: decision when an ask times out"),
    "PermissionRule.tool": _I(_ACTIONS, "weft: tool-name pattern"),
    "PermissionRule.args": _I(_ACTIONS, "weft: argument patterns"),
    "PermissionRule.decision": _I(_PERMISSIONS, "weft: allow, ask or deny"),
    "PermissionRule.reason": _I(_GATE, "weft: shown with a denial"),
    # -- prompts ---------------------------------------------------------------------------
    "PromptDef.name": _I(_LOADER, "the file stem"),
    "PromptDef.toolDescription": _I(_TOOL_SPECS, "the prompt tool's description"),
    "PromptDef.prompt": _I(_CONTEXT, "the rendered system prompt"),
    "PromptDef.model": _I(_MODEL_STEP, "the model of each step"),
    "PromptDef.includeChat": _I(_SCOPED, "a prompt tool sees the caller's chat"),
    "PromptDef.includePastTools": _I(_SCOPED, "a prompt tool sees past tool calls"),
    "PromptDef.parallelToolCalls": _I(_MODEL_REQUEST, "sent with the request"),
    "PromptDef.toolChoice": _I(_MODEL_REQUEST, "sent with the request"),
    "PromptDef.requiredSchema": _I(_STRUCTURED, "structured output, validated"),
    "PromptDef.variables": _I(_VARIABLES, "declared env values, checked at thread start"),
    "PromptDef.env": _I(_ACTIVE, "prompt-level env (lowest)"),
    "PromptDef.reasoning": _I(_STRUCTURED, "passed to providers that take it"),
    "PromptDef.recentImageThreshold": _I(_IMAGES, "older images become a placeholder"),
    "PromptDef.providerOptions": _I(_MODEL_REQUEST, "merged over the model's"),
    "PromptDef.hooks": _I(_HOOK_SCOPE, "replaces the agent's hooks"),
    "PromptDef.tools": _I(
        _TOOL_SPECS, "the tools the model is offered; `tasks`: the task tools (docs/tasks.md)"
    ),
    "PromptDef.permissions": _I(_PERMISSIONS, "weft: the prompt's permission rules"),
    "PromptPart.type": _I(_CONTEXT, "text, include or env"),
    "PromptPart.content": _I(_CONTEXT, "literal text"),
    "PromptPart.prompt": _I(_CONTEXT, "the included prompt"),
    "PromptPart.property": _I(_CONTEXT, "a model-visible env value"),
    "VariableDef.type": _I(_VARIABLES, "the type of a thread value given without one"),
    "VariableDef.required": _I(_VARIABLES, "a thread without it does not start"),
    "VariableDef.scoped": _R(
        "a prompt cannot scope a variable; list the values a subagent needs in its tool "
        "entry's `scopedEnv`, which keeps them runtime-only and out of inheritance"
    ),
    "VariableDef.description": _I(_VARIABLES, "shown when a required one is missing"),
    # -- tool entries ----------------------------------------------------------------------
    "ToolRef.name": _I(_TOOL_SPECS, "the tool offered"),
    "ToolRef.env": _R(_NO_TOOL_ENV),
    "ToolRef.options": _R(_NO_TOOL_OPTIONS),
    "AskHumanOptions.timeoutSeconds": _I(_GATE, "weft: ask_human timeout"),
    "AskHumanOptions.default": _I(_GATE, "weft: answer on timeout"),
    "PromptToolConfig.name": _I(_PROMPT_TOOLS, "the prompt run as a tool"),
    "PromptToolConfig.includeTextResponse": _I(_PROMPT_TOOLS, "shapes the tool result"),
    "PromptToolConfig.includeToolCalls": _I(_PROMPT_TOOLS, "shapes the tool result"),
    "PromptToolConfig.includeErrors": _I(_PROMPT_TOOLS, "shapes the tool result"),
    "PromptToolConfig.initUserMessageProperty": _I(
        "contract/prompt_tools.py", "the prompt tool's first message"
    ),
    "PromptToolConfig.initAttachmentsProperty": _I(_PROMPT_TOOLS, "the first attachments"),
    "SubagentToolConfig.name": _I(_SUBAGENTS, "the dual_ai agent spawned"),
    "SubagentToolConfig.blocking": _I(_SUBAGENTS, "wait for the child's report"),
    "SubagentToolConfig.initUserMessageProperty": _I(_SUBAGENTS, "the child's first message"),
    "SubagentToolConfig.initAttachmentsProperty": _I(_SUBAGENTS, "files copied to the child"),
    "SubagentToolConfig.initAgentNameProperty": _I(_SUBAGENTS, "the child's name"),
    "SubagentToolConfig.immediate": _I(_SUBAGENTS, "spawned before the first step"),
    "SubagentToolConfig.optional": _I(_CATALOG, "env flag enabling it"),
    "SubagentToolConfig.resumable": _I(_SUBAGENTS, "subagent_create/subagent_message"),
    "SubagentToolConfig.scopedEnv": _I(_SPAWNER, "weft: runtime-only env for the child"),
    "SubagentToolConfig.env": _R(_NO_AGENT_ENV),
    "SubagentToolConfig.options": _R(_NO_AGENT_OPTIONS),
    "ResumableConfig.receivesMessages": _I(_SUBAGENTS, "the side parent messages wake"),
    "ResumableConfig.maxInstances": _I(_SUBAGENTS, "subagent_create refuses past it"),
    "ResumableConfig.parentCommunication": _I(_REGISTRY, "implicit or explicit reports"),
    "ImmediateConfig.nameEnv": _I(_SUBAGENTS, "the child's name from env"),
    "ImmediateConfig.descriptionEnv": _I(_SUBAGENTS, "the child's description from env"),
    "ImmediateConfig.scopedEnv": _I(_SUBAGENT_TYPES, "runtime-only env for the child"),
    "HandoffToolConfig.name": _I(_SUBAGENTS, "the ai_human agent handed to"),
    "HandoffToolConfig.initUserMessageProperty": _I(_SUBAGENTS, "the handoff message"),
    "HandoffToolConfig.env": _R(_NO_AGENT_ENV.replace("the child", "the target agent")),
    "HandoffToolConfig.options": _R(_NO_AGENT_OPTIONS),
    # -- function tools and hooks (Python) -------------------------------------------------
    "define_tool.name": _I(_LOADER, "the file stem"),
    "define_tool.description": _I(_API, "what the model sees"),
    "define_tool.args": _I(_TOOL_EXECUTE, "argument schema, validated"),
    "define_tool.execute": _I(_TOOL_EXECUTE, "run by tool.call"),
    "define_tool.variables": _I(_VARIABLES, "declared env values, checked at thread start"),
    "define_tool.quick": _I(_TOOL_RUNNER, "run as a local activity (weft's own field)"),
    "define_tool.side_effects": _R(
        "every tool is treated as having side effects: a call interrupted past its retries "
        "is reported to the model as outcome_unknown whatever this says"
    ),
    "HookSpec.id": _I(_HOOKS, "the id prompts and agents list"),
    "HookSpec.hook": _I(_HOOKS, "the hook point"),
    "define_hook.id": _I(_LOADER, "the file stem; what prompts and agents list"),
    "define_hook.hook": _I(_HOOKS, "the hook point it runs at"),
    "define_hook.execute": _I(_HOOKS, "run inside the activity of the fact"),
    # -- models ----------------------------------------------------------------------------
    "ModelDef.name": _I(_LOADER, "the file stem"),
    "ModelDef.provider": _I(_MODEL_CALL, "the worker's provider adapter"),
    "ModelDef.model": _I(_MODEL_REQUEST, "the provider's model name"),
    "ModelDef.fallbacks": _I(_MODEL_STEP, "tried in order after retries"),
    "ModelDef.inputPrice": _I(_MODEL_SUPPORT, "costUsd"),
    "ModelDef.outputPrice": _I(_MODEL_SUPPORT, "costUsd"),
    "ModelDef.cachedPrice": _I(_MODEL_SUPPORT, "costUsd"),
    "ModelDef.providerOptions": _I(_MODEL_REQUEST, "merged into the request"),
    "ModelDef.providerTools": _I(_OPENAI, "sent with the tools"),
    "ModelDef.capabilities": _I(_CONTEXT_LIMITS, "see Capabilities"),
    "Capabilities.supportsImages": _I(_IMAGES, "false: images left out"),
    "Capabilities.supportsToolCalls": _I(_CAPABILITIES, "false: prompts with tools refused"),
    "Capabilities.supportsStreaming": _I(_STRUCTURED, "false: one response, no deltas"),
    "Capabilities.supportsJsonMode": _I(_SCHEMA_CHECKS, "false: requiredSchema refused"),
    "Capabilities.maxContextTokens": _I(_CONTEXT_LIMITS, "the context window"),
    "Capabilities.maxOutputTokens": _I(_CONTEXT_LIMITS, "reserved and sent as max tokens"),
    "Capabilities.reasoningLevels": _I(_SCHEMA_CHECKS, "other reasoning efforts refused"),
    # -- MCP servers and entries -----------------------------------------------------------
    "McpServerDef.name": _I(_LOADER, "weft: the file stem; `{mcp: name}` and `name.tool` use it"),
    "McpServerDef.description": _I(_MCP, "weft: for people reading it; not sent to the model"),
    "McpServerDef.command": _I(_MCP_REACH, "weft: the stdio server's program"),
    "McpServerDef.args": _I(_MCP_REACH, "weft: its arguments, `${NAME}` from the thread's env"),
    "McpServerDef.env": _I(_MCP_REACH, "weft: its environment, `${NAME}` from the thread's env"),
    "McpServerDef.cwd": _I(
        _MCP_REACH, "weft: its working directory (default: the definitions folder)"
    ),
    "McpServerDef.url": _I(_MCP_REACH, "weft: the streamable HTTP endpoint"),
    "McpServerDef.headers": _I(_MCP_REACH, "weft: HTTP headers, `${NAME}` from the thread's env"),
    "McpServerDef.allow": _I(_MCP, "weft: only these tools are listed or may be named"),
    "McpServerDef.deny": _I(_MCP, "weft: these tools are never listed nor may be named"),
    "McpServerDef.prefix": _I(_MCP, "weft: put before each tool's name, as the model sees it"),
    "McpServerDef.startupTimeoutSeconds": _I(
        _MCP_LISTING, "weft: a listing that takes longer fails"
    ),
    "McpServerDef.callTimeoutSeconds": _I(_MCP_CALLS, "weft: one tool call's limit"),
    "McpServerDef.elicitationTimeoutSeconds": _I(_MCP_ELICIT, "weft: how long a person may answer"),
    "McpServerDef.maxSessions": _I(
        _MCP_POOL, "weft: sessions open at once for one env (a call holds its session alone)"
    ),
    "McpRef.mcp": _I(_MCP, "weft: the server whose tools are offered"),
    "McpRef.tools": _I(_MCP, "weft: only these of its tools"),
}


def support_of(key: str) -> Support | None:
    """The row for `Model.field`, or None when the table lacks it (the tests forbid that)."""
    return FIELDS.get(key)
