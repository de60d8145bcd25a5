"""docs/http-api.md's route table lists exactly the routes `weft serve` serves, so the docs
cannot drift from the app again (`POST /threads/{id}/budget` was once missing)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from weft.api import create_api
from weft.api.context import ApiContext
from weft.api.event_feed import open_event_feed
from weft.client.threads import Threads
from weft.store import Store

DOC = Path(__file__).resolve().parents[1] / "docs" / "http-api.md"
# A table row whose first cell names a route: "| `POST /threads/{id}/turns` | …", or
# "| `GET`/`POST /threads/{parent}/variables/{request}` | …".
_ROW = re.compile(r"^\|\s*((?:`[A-Z]+`/)*`[A-Z]+ /[^`]*`)\s*\|")


def _normal(path: str) -> str:
    """A path with its parameters unnamed: the docs say `{id}` where the code says
    `{thread_id}`, and a converter (`{path:path}`) is the code's business."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def documented(text: str) -> set[tuple[str, str]]:
    """(method, path) of every row of the `## Routes` table of `text`."""
    section = text.split("\n## Routes\n", 1)[1].split("\n#", 1)[0]
    routes = set()
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        cell = match.group(1).replace("`", "")
        methods, _, path = cell.partition(" ")
        routes |= {(method, _normal(path)) for method in methods.split("/")}
    return routes


def served(routes: Iterable[Any], prefix: str = "") -> set[tuple[str, str]]:
    """(method, path) of every route of an app, into included routers (FastAPI keeps them
    as `_IncludedRouter` entries with their prefix)."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found |= served(included.routes, prefix + route.include_context.prefix)
            continue
        for method in getattr(route, "methods", None) or ():
            if method != "HEAD":
                found.add((method, _normal(prefix + route.path)))
    return found


async def test_the_route_table_lists_every_served_route(temporal_client, weft_config):
    """Every route of `create_api` has a row in docs/http-api.md's table, and every row a route."""
    store = Store.open(weft_config.store_url())
    feed = await open_event_feed(store)
    try:
        ctx = ApiContext(
            store=store,
            client=temporal_client,
            threads=Threads(temporal_client, task_queue="routes-doc", store=store),
            feed=feed,
            task_queue="routes-doc",
        )
        app_routes = served(create_api(ctx, "token").routes)
    finally:
        await feed.close()
        store.close()
    assert ("POST", "/threads/{}/budget") in app_routes  # the walk reaches included routers
    text = DOC.read_text()
    rows = documented(text)
    assert sorted(app_routes - rows) == [], "served but not in docs/http-api.md's route table"
    assert sorted(rows - app_routes) == [], "in docs/http-api.md's route table but not served"

    # The check sees a planted gap: the budget row removed from the table.
    planted = "\n".join(
        line for line in text.splitlines() if not line.startswith("| `POST /threads/{id}/budget`")
    )
    assert app_routes - documented(planted) == {("POST", "/threads/{}/budget")}
