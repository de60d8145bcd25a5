"""Building MCP tool catalogues from a server's listing (activities/mcp/catalog.py), and
what a model request makes of them (context_window.frame's tools and notes)."""

from __future__ import annotations

from typing import Any

from support import agent_definitions

from weft.activities.context_window import frame
from weft.activities.mcp.catalog import (
    catalog_tools,
    failed_catalog,
    ready_catalog,
    reserved_names,
    tools_digest,
)
from weft.activities.mcp.types import ListedTool
from weft.contract.mcp import McpRef, McpServerDef
from weft.store import Store

AT = "2026-11-24T00:00:00.000Z"
OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def _server(**fields: Any) -> McpServerDef:
    return McpServerDef(name="docs", command="python", **fields)


def _listed(*names: str, schema: Any = None) -> list[ListedTool]:
    return [
        ListedTool(name=n, description=f"{n} things", input_schema=schema or OBJECT) for n in names
    ]


def test_allow_and_deny_filter_the_listing_in_order():
    """An allow-list keeps only its tools and a deny-list drops its own, in listing order."""
    listed = _listed("search", "fetch", "delete")
    allowed, _ = catalog_tools(_server(allow=["fetch", "search", "absent"]), listed, set())
    denied, _ = catalog_tools(_server(deny=["delete"]), listed, set())
    assert [t.tool for t in allowed] == ["search", "fetch"]
    assert [t.tool for t in denied] == ["search", "fetch"]


def test_prefix_names_the_tool_for_the_model_and_keeps_the_server_name():
    """With a prefix the model calls `docs_search`, and the spec still names `search` on the
    server it runs on."""
    [spec], warnings = catalog_tools(_server(prefix="docs_"), _listed("search"), set())
    assert (spec.name, spec.tool, spec.server) == ("docs_search", "search", "docs")
    assert spec.offered() == {
        "name": "docs_search",
        "description": "search things",
        "parameters": OBJECT,
    }
    assert warnings == []


def test_an_untyped_object_schema_is_offered_as_an_object():
    """A schema without `type` is accepted and sent with `"type": "object"` for providers."""
    [spec], _ = catalog_tools(_server(), _listed("ping", schema={"properties": {}}), set())
    assert spec.parameters == {"type": "object", "properties": {}}


def test_malformed_schemas_are_skipped_with_a_warning_naming_server_and_tool():
    """A non-object type, an invalid JSON Schema and a schema that is not an object are each
    skipped; the warning names the server, the tool and what is wrong."""
    listed = [
        ListedTool(name="good", description="", input_schema=OBJECT),
        ListedTool(name="arrayish", description="", input_schema={"type": "array"}),
        ListedTool(name="broken", description="", input_schema={"type": "object", "required": 3}),
        ListedTool(name="listy", description="", input_schema=["not", "a", "schema"]),
    ]
    tools, warnings = catalog_tools(_server(), listed, set())
    assert [t.tool for t in tools] == ["good"]
    assert len(warnings) == 3
    assert all(w.startswith("MCP server 'docs': tool ") for w in warnings)
    arrayish, broken, listy = warnings
    assert "'arrayish'" in arrayish and '"type": "array", not "object"' in arrayish
    assert "'broken'" in broken and "not a valid JSON Schema at required" in broken
    assert "'listy'" in listy and "not a JSON object (got list)" in listy


def test_names_providers_refuse_are_skipped():
    """A tool whose model name breaks the providers' name rule (a dot, too long) is skipped."""
    listed = _listed("has.dot", "x" * 70, "fine")
    tools, warnings = catalog_tools(_server(), listed, set())
    assert [t.tool for t in tools] == ["fine"]
    assert ["'has.dot'" in warnings[0], "does not match" in warnings[1]] == [True, True]


def test_the_snapshots_own_tools_win_a_name_collision():
    """A server tool named like one of the thread's tools (or weft's read_output) is skipped
    with a warning, and one listed twice keeps its first listing."""
    snapshot = agent_definitions("unused").snapshot("helper")
    reserved = reserved_names(snapshot)
    listed = [*_listed("weather", "read_output", "lookup"), *_listed("lookup", schema={})]
    tools, warnings = catalog_tools(_server(), listed, reserved)
    assert [(t.tool, t.parameters) for t in tools] == [("lookup", OBJECT)]
    assert "'weather'" in warnings[0] and "taken by a tool of the thread's own" in warnings[0]
    assert "'read_output'" in warnings[1]
    assert "lists 'lookup' twice" in warnings[2]


def test_digests_are_stable_and_content_ids_follow_every_change():
    """The same listing gives the same digest and id at any time; a changed description
    changes both; a skipped tool changes the id (its warning) but not the digest."""
    server = _server()
    first = ready_catalog(server, _listed("search"), reserved=set(), resolved_at=AT)
    again = ready_catalog(server, _listed("search"), reserved=set(), resolved_at="later")
    assert (again.digest, again.catalog_id) == (first.digest, first.catalog_id)
    assert first.catalog_id.startswith("mcpcat_") and first.digest == tools_digest(first.tools)

    changed = ready_catalog(
        server,
        [ListedTool(name="search", description="new words", input_schema=OBJECT)],
        reserved=set(),
        resolved_at=AT,
    )
    assert changed.digest != first.digest and changed.catalog_id != first.catalog_id

    bad = ListedTool(name="bad", description="", input_schema={"type": "string"})
    skipped = ready_catalog(server, [*_listed("search"), bad], reserved=set(), resolved_at=AT)
    assert skipped.digest == first.digest and skipped.catalog_id != first.catalog_id
    assert skipped.warnings and skipped.status == "ready"


def test_a_failed_server_has_no_tools_and_its_own_id():
    """A server that could not be listed is a failed catalogue with its error, no tools,
    and an id that differs from an empty ready one's."""
    failed = failed_catalog("docs", "MCP server 'docs': will not start", resolved_at=AT)
    empty = ready_catalog(_server(), [], reserved=set(), resolved_at=AT)
    assert (failed.status, failed.tools, failed.error) == (
        "failed",
        [],
        "MCP server 'docs': will not start",
    )
    assert failed.digest == empty.digest and failed.catalog_id != empty.catalog_id


def test_a_model_request_offers_the_prompts_mcp_tools_and_tells_of_the_missing(tmp_path):
    """frame() adds the catalogued tools of the prompt's servers after its own, notes a
    failed server and a skipped tool in the system prompt, and ignores other servers."""
    snapshot = agent_definitions("unused", tools=["weather"]).snapshot("helper")
    prompt = snapshot.prompts["helper_prompt"]
    prompt = prompt.model_copy(update={"tools": ["weather", McpRef(mcp="docs"), "web.fetch"]})
    snapshot = snapshot.model_copy(update={"prompts": {**snapshot.prompts, prompt.name: prompt}})
    bad = ListedTool(name="bad", description="", input_schema={"type": "string"})
    catalogs = {
        "docs": ready_catalog(_server(), [*_listed("search"), bad], reserved=set(), resolved_at=AT),
        "web": failed_catalog("web", "MCP server 'web': timed out", resolved_at=AT),
        "other": ready_catalog(
            McpServerDef(name="other", url="http://127.0.0.1:1/mcp"),
            _listed("elsewhere"),
            reserved=set(),
            resolved_at=AT,
        ),
    }
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        plain = frame(snapshot, store.threads.get("t1"), None, "a")
        with_mcp = frame(snapshot, store.threads.get("t1"), None, "a", mcp=catalogs)
    finally:
        store.close()
    own = [t["name"] for t in plain.tools]
    assert own[0] == "weather"
    assert [t["name"] for t in with_mcp.tools] == [*own, "search"]
    assert with_mcp.system.startswith(plain.system)
    notes = with_mcp.system[len(plain.system) :]
    assert (
        "the tools of MCP server 'web' are unavailable this turn: MCP server 'web': timed out"
        in notes
    )
    assert "MCP server 'docs': tool 'bad' skipped" in notes
    assert "other" not in notes
