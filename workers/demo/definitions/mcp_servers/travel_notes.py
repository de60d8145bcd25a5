"""The demo's MCP server (docs/mcp.md): the traveller's trip notes, kept in memory while
its session lives. weft starts it over stdio (mcp/travel_notes.yaml); it needs no network.

Not a function tool: the loader imports Python only from tools/, hooks/ and effects/.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP


def build() -> FastMCP:
    """The server and its three tools; mcp/travel_notes.yaml offers the model two of them."""
    server = FastMCP("travel-notes", log_level="WARNING")
    notes: list[str] = []

    @server.tool(structured_output=False)
    def add_note(text: str) -> str:
        """Save a note about the trip, such as a packing list or a booking."""
        notes.append(text.strip())
        return f"Saved note {len(notes)}: {notes[-1]}"

    @server.tool()
    def list_notes() -> list[str]:
        """Every note saved about the trip, oldest first."""
        return list(notes)

    @server.tool(structured_output=False)
    def clear_notes() -> str:
        """Delete every note."""
        notes.clear()
        return "All notes deleted."

    return server


if __name__ == "__main__":
    build().run("stdio")
