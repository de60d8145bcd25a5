"""The thread's MCP catalogues (contract/mcp_book.py) and elicitation answer checks."""

from __future__ import annotations

from unit_support import FixedContext, memory, snapshot

from weft.contract.definitions import PromptDef
from weft.contract.mcp import (
    McpCallOutcome,
    McpRef,
    McpServerCatalog,
    McpToolSpec,
    elicitation_problems,
)
from weft.contract.mcp_book import McpBook
from weft.workflows.continuation import carry_over, restore

SERVERS = ["files", "web"]


def _prompt(*tools: str | McpRef) -> PromptDef:
    return PromptDef(name="p", tool_description="x", prompt="Hi.", model="m", tools=list(tools))


def _catalog(server: str, *tools: str, digest: str = "d1") -> McpServerCatalog:
    return McpServerCatalog(
        catalog_id=f"mcpcat_{server}_{digest}",
        server=server,
        status="ready",
        tools=[McpToolSpec(name=f"{server}_{t}", server=server, tool=t) for t in tools],
        digest=digest,
        resolved_at="now",
    )


def test_a_prompt_lists_only_its_servers_that_have_no_catalogue() -> None:
    """`{mcp: x}` and `x.tool` entries name servers; those already listed are not due."""
    book = McpBook(catalogs={"web": _catalog("web", "get")})
    prompt = _prompt("weather", McpRef(mcp="files"), "web.get", "web.post")
    assert book.servers(prompt, SERVERS) == ["files", "web"]
    assert book.to_list(prompt, SERVERS) == {"files": "prompt_active"}
    book.resolved({"files": _catalog("files", "read")})
    assert book.to_list(prompt, SERVERS) == {}


def test_tools_are_found_by_the_name_the_model_calls_them_by() -> None:
    """A whole-server entry offers every tool; `server.tool` offers that one tool only."""
    book = McpBook(catalogs={"files": _catalog("files", "read", "write")})
    whole, single = _prompt(McpRef(mcp="files")), _prompt("files.read")
    assert book.tool(whole, "files_write") is not None
    found = book.tool(single, "files_read")
    assert found is not None and (found.server, found.tool) == ("files", "read")
    assert book.tool(single, "files_write") is None
    assert book.tool(_prompt(McpRef(mcp="files", tools=["write"])), "files_read") is None


def test_one_name_from_two_servers_is_a_clash_the_first_server_wins() -> None:
    """Two servers offering one model-facing name: the first listed is offered, and the
    clash is named so the definitions can give one a prefix."""
    clashing = _catalog("web", "get")
    clashing = clashing.model_copy(
        update={"tools": [McpToolSpec(name="files_read", server="web", tool="read")]}
    )
    book = McpBook(catalogs={"files": _catalog("files", "read"), "web": clashing})
    prompt = _prompt(McpRef(mcp="files"), McpRef(mcp="web"))
    found = book.tool(prompt, "files_read")
    assert found is not None and found.server == "files"
    assert book.clashes(prompt) == [
        "prompt 'p' offers tool 'files_read' of MCP server 'files'; 'web' has one by that "
        "name too, not offered (give one server a `prefix`)"
    ]
    assert book.clashes(_prompt(McpRef(mcp="files"))) == []


def test_a_changed_list_or_a_refresh_makes_a_server_due_again() -> None:
    """A call reporting another digest, or `refresh_tools`, lists the server again, once."""
    book = McpBook(catalogs={"files": _catalog("files", "read"), "web": _catalog("web", "get")})
    prompt = _prompt(McpRef(mcp="files"), McpRef(mcp="web"))
    book.observe(McpCallOutcome(server="files", digest="d1"))  # unchanged
    book.observe(None)
    assert book.to_list(prompt, SERVERS) == {}
    book.observe(McpCallOutcome(server="files", digest="d2"))
    book.request_refresh(["web"])
    assert book.to_list(prompt, SERVERS) == {"files": "list_changed", "web": "refresh"}
    book.resolved({"files": _catalog("files", "read", "new", digest="d2")})
    assert book.to_list(prompt, SERVERS) == {"web": "refresh"}


def test_catalogues_and_due_refreshes_survive_continue_as_new() -> None:
    """The carry-over holds the catalogues and the refreshes not yet done."""
    mem = memory()
    mem.mcp.resolved({"files": _catalog("files", "read")})
    mem.mcp.request_refresh(["files"])
    restored = restore("t1", mem.start, carry_over(mem, snapshot(), None), FixedContext())
    assert restored.mcp.catalogs == mem.mcp.catalogs
    assert restored.mcp.due == {"files": "refresh"}
    assert restored.mcp.ids() == {"files": "mcpcat_files_d1"}


def test_an_elicitation_answer_must_fit_the_requested_schema() -> None:
    """Required fields, primitive types, enums and unasked fields are each named."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "size": {"type": "string", "enum": ["s", "m"]},
        },
        "required": ["name"],
    }
    assert elicitation_problems(schema, {"name": "Ada", "age": 36, "size": "m"}) == []
    assert elicitation_problems(schema, "Ada") == [
        "the answer must be an object of the requested fields"
    ]
    problems = elicitation_problems(schema, {"age": True, "size": "xl", "extra": 1})
    assert problems == [
        "'name' is required",
        "'age' must be of type integer",
        "'size' must be one of ['s', 'm']",
        "'extra' was not asked for (fields: name, age, size)",
    ]
