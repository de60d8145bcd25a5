"""The live inbox page: `/inbox` serves a small HTML page (and its script and style) that
lists the threads waiting on a human, shows a thread's transcript live and answers its
pending action, using only the JSON and SSE routes of the API.

The token arrives once as `/inbox?token=…` (the middleware checks it); this moves it into
an HttpOnly, SameSite=Lax cookie and redirects, so it leaves the address bar and the
history, and the page's fetches and EventSource carry it without script ever seeing it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from weft.api.context import ApiContext
from weft.api.gateway.app import PAGE_PATH, TOKEN_COOKIE, GatewayError

ASSETS = Path(__file__).resolve().parent / "inbox"
MEDIA_TYPES = {"inbox.js": "text/javascript", "inbox.css": "text/css"}
# Without an icon of its own the browser asks for /favicon.ico and logs the 404.
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#2f5fd0"/>'
    '<path d="M3 5h10M3 8h10M3 11h10M6 3v10M10 3v10" stroke="#fff" stroke-width="1.2"/></svg>'
)

# The page loads nothing but its own files and talks only to this origin: no inline
# script or style, no frames, no form posts elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def router(ctx: ApiContext) -> APIRouter:
    """The page and its files; kept out of the OpenAPI document (they are no API)."""
    routes = APIRouter(include_in_schema=False)

    @routes.get(PAGE_PATH)
    async def page(request: Request) -> Response:
        if "token" in request.query_params:
            return _token_to_cookie(request)
        return _asset("inbox.html", "text/html; charset=utf-8")

    @routes.get(PAGE_PATH + "/icon.svg")
    async def icon() -> Response:
        return Response(ICON, media_type="image/svg+xml", headers=SECURITY_HEADERS)

    @routes.get(PAGE_PATH + "/{name}")
    async def asset(name: str) -> Response:
        media_type = MEDIA_TYPES.get(name)
        if media_type is None:
            raise GatewayError(404, f"no file {name!r} in the inbox page")
        return _asset(name, f"{media_type}; charset=utf-8")

    return routes


def _token_to_cookie(request: Request) -> Response:
    """303 to the bare page, keeping the token in the cookie.

    A token in the page's address is the credential the middleware judged (even over a
    cookie of an older token), so reaching here means it is right.
    """
    response = RedirectResponse(PAGE_PATH, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        TOKEN_COOKIE,
        request.query_params["token"],
        path="/",
        httponly=True,
        # Lax, not Strict: a link to the page from another site (a chat message) still
        # opens it, and other sites still cannot POST with the cookie.
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


def _asset(name: str, media_type: str) -> Response:
    # Read per request: three small files, and an edited page shows on reload.
    return Response((ASSETS / name).read_bytes(), media_type=media_type, headers=SECURITY_HEADERS)


__all__ = ["router"]
