"""MCP servers in definitions: loaded from mcp/<name>.yaml, checked, and frozen in snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import weft
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import McpRef, McpServerDef
from weft.definitions import (
    DefinitionError,
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
    load_directory,
)

STDIO = (
    "description: files of the project\n"
    "command: python\n"
    "args: [-m, files_server, --root, '${PROJECT}']\n"
    "env: {TOKEN: '${FILES_TOKEN}'}\n"
    "cwd: servers\n"
    "deny: [delete]\n"
    "startupTimeoutSeconds: 5\n"
)
HTTP = (
    "url: http://127.0.0.1:8931/mcp\n"
    "headers: {Authorization: 'Bearer ${GH_TOKEN}'}\n"
    "allow: [search, read]\n"
    "prefix: gh_\n"
    "callTimeoutSeconds: 30\n"
    "elicitationTimeoutSeconds: 120\n"
)
BASE = {
    "models/m.yaml": "provider: scripted\nmodel: x\n",
    "prompts/p.yaml": "toolDescription: d\nmodel: m\nprompt: hi\n",
    "agents/a.yaml": "sideA:\n  prompt: p\n",
}
# The id HEAD gave these definitions before MCP servers existed: it must not change.
BASE_SNAPSHOT_ID = "snap_67c26a4dc412eedb3f7f7661"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {**BASE, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _prompt(tools: str, model: str = "m") -> str:
    return f"toolDescription: d\nmodel: {model}\nprompt: hi\ntools: {tools}\n"


def _refusal(tmp_path: Path, files: dict[str, str]) -> str:
    with pytest.raises(DefinitionError) as caught:
        load_directory(_tree(tmp_path, files)).validate(providers=["scripted"])
    return str(caught.value)


def _args() -> type[BaseModel]:
    class Args(BaseModel):
        path: str

    return Args


def test_a_stdio_server_loads_from_yaml(tmp_path):
    """mcp/fs.yaml with `command` loads as a stdio server named by its stem, from its root."""
    definitions = load_directory(_tree(tmp_path, {"mcp/fs.yaml": STDIO}))
    definitions.validate(providers=["scripted"])
    server = definitions.mcp_servers["fs"]
    assert server.transport == "stdio"
    assert server.args == ["-m", "files_server", "--root", "${PROJECT}"]
    assert server.env == {"TOKEN": "${FILES_TOKEN}"}
    assert (server.cwd, server.deny, server.startup_timeout_seconds) == ("servers", ["delete"], 5)
    assert definitions.where("mcp server", "fs") == "mcp/fs.yaml"
    assert definitions.root == tmp_path.resolve()


def test_an_http_server_loads_from_yaml(tmp_path):
    """mcp/gh.yaml with `url` loads as a streamable HTTP server with its headers and filter."""
    definitions = load_directory(_tree(tmp_path, {"mcp/gh.yaml": HTTP}))
    server = definitions.mcp_servers["gh"]
    assert server.transport == "http"
    assert server.headers == {"Authorization": "Bearer ${GH_TOKEN}"}
    assert server.offers("search") and not server.offers("delete")
    assert server.model_name("search") == "gh_search"
    assert (server.call_timeout_seconds, server.elicitation_timeout_seconds) == (30, 120)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"mcp/fs.yaml": "command: python\nurl: http://x/mcp\n"},
            "mcp/fs.yaml: command: give exactly one of `command` (stdio) or `url`",
        ),
        (
            {"mcp/fs.yaml": "description: nothing to run\n"},
            "mcp/fs.yaml: command: give exactly one of `command` (stdio) or `url`",
        ),
        (
            {"mcp/fs.yaml": "command: python\nallow: [a]\ndeny: [b]\n"},
            "mcp/fs.yaml: allow: give `allow` or `deny`, not both",
        ),
        (
            {"mcp/fs.yaml": "command: python\nheaders: {A: b}\n"},
            "mcp/fs.yaml: headers: `headers` apply to a `url` server only",
        ),
        (
            {"mcp/fs.yaml": "url: http://x/mcp\ncwd: here\n"},
            "mcp/fs.yaml: cwd: `args`, `env` and `cwd` apply to a `command` server only",
        ),
        (
            {"mcp/fs.v2.yaml": "command: python\n"},
            "mcp/fs.v2.yaml: name: the file stem 'fs.v2' is the name and must hold no dot",
        ),
        (
            {"mcp/fs.yaml": "name: files\ncommand: python\n"},
            "mcp/fs.yaml: name: 'files' differs from the file stem 'fs'",
        ),
        ({"mcp/fs.yaml": "command: [unclosed\n"}, "mcp/fs.yaml: invalid YAML"),
        ({"mcp/fs.yaml": "- command: python\n"}, "mcp/fs.yaml: must hold one mapping"),
        (
            {"mcp/fs.yaml": "command: python\nstartupTimeoutSeconds: 0\n"},
            "mcp/fs.yaml: field 'startupTimeoutSeconds': Input should be greater than 0",
        ),
        (
            {"mcp/fs.yaml": "command: python\ncolour: teal\n"},
            "mcp/fs.yaml: field 'colour': Extra inputs are not permitted",
        ),
    ],
)
def test_a_bad_server_file_is_refused_naming_file_and_field(tmp_path, files, message):
    """Each malformed server file is a DefinitionError naming the file and the field."""
    with pytest.raises(DefinitionError) as caught:
        load_directory(_tree(tmp_path, files))
    assert str(caught.value).startswith(message)


SERVERS = {"mcp/fs.yaml": STDIO, "mcp/gh.yaml": HTTP}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"prompts/p.yaml": _prompt("[{mcp: fs}, {mcp: nope}]")},
            "prompts/p.yaml: tools[1].mcp: unknown MCP server 'nope'; known servers: fs, gh",
        ),
        (
            {"prompts/p.yaml": _prompt("[fs.delete]")},
            "prompts/p.yaml: tools[0]: MCP server 'fs' does not offer 'delete': its filter "
            "(deny: [delete], mcp/fs.yaml) leaves it out",
        ),
        (
            {"prompts/p.yaml": _prompt("[{mcp: gh, tools: [search, write]}]")},
            "prompts/p.yaml: tools[0].tools[1]: MCP server 'gh' does not offer 'write': its "
            "filter (allow: [search, read], mcp/gh.yaml)",
        ),
        (
            {"prompts/p.yaml": _prompt("[{mcp: gh, tools: []}]")},
            "prompts/p.yaml: tools[0].tools: lists no tools",
        ),
        (
            {"prompts/p.yaml": _prompt("[{name: fs.read}]")},
            "prompts/p.yaml: tools[0].name: 'fs.read' is a tool of MCP server 'fs': list it as "
            "the string 'fs.read' or as {mcp: fs, tools: [read]}",
        ),
        (
            {"prompts/p.yaml": _prompt("[slack.post]")},
            "prompts/p.yaml: tools[0]: unknown tool 'slack.post'; known tools: (none); as "
            "`server.tool` it would need an MCP server 'slack' (mcp/slack.yaml), and known "
            "servers are: fs, gh",
        ),
        (
            {"prompts/p.yaml": _prompt("[{mcp: fs}, serch]")},
            "prompts/p.yaml: tools[1]: unknown tool 'serch'",
        ),
        (
            {"prompts/p.yaml": _prompt("['fs.read file']")},
            "prompts/p.yaml: tools[0]: MCP tool 'read file' of server 'fs' would be offered to "
            "the model as 'read file', a name providers refuse",
        ),
        (
            {"mcp/gh.yaml": HTTP.replace("[search, read]", "[search, repo.read]")},
            "mcp/gh.yaml: allow[1]: MCP tool 'repo.read' of server 'gh' would be offered",
        ),
        (
            {"prompts/fs.helper.yaml": "toolDescription: d\nmodel: m\nprompt: hi\n"},
            "prompts/fs.helper.yaml: name: 'fs.helper' is ambiguous: it is a prompt and, as "
            "`server.tool`, the tool 'helper' of MCP server 'fs' (mcp/fs.yaml)",
        ),
        (
            {
                "models/plain.yaml": "provider: scripted\nmodel: x\n"
                "capabilities: {supportsToolCalls: false}\n",
                "prompts/p.yaml": _prompt("[{mcp: fs}]", model="plain"),
            },
            "prompts/p.yaml: tools: prompt 'p' (prompts/p.yaml) offers tools ({mcp: fs}) but "
            "model 'plain'",
        ),
    ],
)
def test_a_bad_mcp_entry_is_refused_naming_file_and_field(tmp_path, files, message):
    """Each wrong use of an MCP server is a DefinitionError naming the file and the field."""
    assert _refusal(tmp_path, {**SERVERS, **files}).startswith(message)


def test_a_function_tool_named_like_a_server_tool_is_ambiguous():
    """A function tool named `fs.read` while server `fs` exists is refused naming both."""
    definitions = Definitions().add(
        define_model(name="m", provider="scripted", model="x"),
        define_prompt(name="p", tool_description="d", model="m", prompt="hi"),
        define_agent(name="a", side_a={"prompt": "p"}),
        define_tool(name="fs.read", description="reads", args=_args(), execute=lambda s, a: ""),
        McpServerDef(name="fs", command="python"),
    )
    with pytest.raises(DefinitionError) as caught:
        definitions.validate()
    assert str(caught.value).startswith(
        "tool 'fs.read' (Python): name: 'fs.read' is ambiguous: it is a function tool and, "
        "as `server.tool`, the tool 'read' of MCP server 'fs' (mcp server 'fs' (Python))"
    )


def test_python_definitions_take_a_server():
    """`Definitions.add(weft.McpServerDef(...))` defines a server; a second of the name is refused."""
    assert weft.McpServerDef is McpServerDef
    definitions = Definitions().add(
        define_model(name="m", provider="scripted", model="x"),
        define_prompt(
            name="p", tool_description="d", model="m", prompt="hi", tools=["fs.read", {"mcp": "fs"}]
        ),
        define_agent(name="a", side_a={"prompt": "p"}),
        weft.McpServerDef(name="fs", command="python", args=["-m", "fs"]),
    )
    definitions.validate(providers=["scripted"])
    assert definitions.root is None
    assert list(definitions.snapshot("a").mcp_servers) == ["fs"]
    with pytest.raises(DefinitionError, match="mcp server 'fs' is already defined"):
        definitions.add(McpServerDef(name="fs", url="http://x/mcp"))


def test_mcp_entries_in_a_prompt_tool_are_allowed_and_indexed(tmp_path):
    """A prompt run as a prompt tool may list MCP entries; its agent entry after one is
    refused at its own index."""
    files = {
        **SERVERS,
        "prompts/p.yaml": _prompt("[helper]"),
        "prompts/helper.yaml": _prompt("[{mcp: fs}, gh.search]"),
    }
    definitions = load_directory(_tree(tmp_path, files))
    definitions.validate(providers=["scripted"])
    assert list(definitions.snapshot("a").mcp_servers) == ["fs", "gh"]
    files["agents/kid.yaml"] = "exposeAsTool: true\nsideA:\n  prompt: p\n"
    files["prompts/helper.yaml"] = _prompt("[{mcp: fs}, kid]")
    assert _refusal(tmp_path / "kid", files).startswith(
        "prompts/helper.yaml: tools[1]: 'kid' is an agent, but prompt 'helper' runs as a "
        "prompt tool"
    )


def test_the_snapshot_holds_the_servers_used_and_no_tool_specs_for_them(tmp_path):
    """A snapshot freezes the servers its prompts, handoff targets' and prompt tools' use,
    and no other; their tools get no ToolSpec (they are listed at run time)."""
    files = {
        **SERVERS,
        "mcp/unused.yaml": "url: http://127.0.0.1:9/mcp\n",
        "mcp/docs.yaml": "command: python\n",
        "prompts/p.yaml": _prompt("[{mcp: fs}, helper, desk]"),
        "prompts/helper.yaml": _prompt("[gh.search]"),
        "prompts/desk_prompt.yaml": _prompt("[docs.lookup]"),
        "agents/desk.yaml": "exposeAsTool: true\nsideA:\n  prompt: desk_prompt\n",
    }
    definitions = load_directory(_tree(tmp_path, files))
    definitions.validate(providers=["scripted"])
    snapshot = definitions.snapshot("a")
    assert list(snapshot.mcp_servers) == ["docs", "fs", "gh"]
    assert snapshot.mcp_servers["gh"] == definitions.mcp_servers["gh"]
    assert set(snapshot.tools) == {"helper", "desk"}


def test_a_snapshot_without_mcp_keeps_its_id(tmp_path):
    """Definitions whose prompts use no MCP server keep the snapshot id they had before,
    even with a server defined; using one changes it."""
    root = _tree(tmp_path, {"mcp/fs.yaml": STDIO})
    snapshot = load_directory(root).snapshot("a")
    assert (snapshot.snapshot_id, snapshot.mcp_servers) == (BASE_SNAPSHOT_ID, {})
    (root / "prompts/p.yaml").write_text(_prompt("[{mcp: fs}]"))
    used = load_directory(root).snapshot("a").snapshot_id
    (root / "mcp/fs.yaml").write_text(STDIO.replace("delete", "move"))
    assert len({BASE_SNAPSHOT_ID, used, load_directory(root).snapshot("a").snapshot_id}) == 3


def test_mcp_entries_survive_a_snapshot_round_trip(tmp_path):
    """`{mcp: x}` and `x.tool` entries, and the servers, come back as they went into JSON."""
    files = {**SERVERS, "prompts/p.yaml": _prompt("[{mcp: gh, tools: [read]}, fs.read]")}
    snapshot = load_directory(_tree(tmp_path, files)).snapshot("a")
    again = DefinitionSnapshot.model_validate(snapshot.model_dump(mode="json"))
    assert again == snapshot
    assert again.prompts["p"].tools == [McpRef(mcp="gh", tools=["read"]), "fs.read"]
    assert again.mcp_servers["fs"].transport == "stdio"
