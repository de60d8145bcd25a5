"""One allowed browser origin (`weft serve --cors-origin`): its preflights pass before the
token is asked for, every other origin gets no CORS grant, and none is granted by default."""

from __future__ import annotations

import httpx
from api_support import api_stack

ORIGIN = "https://inbox.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
}


async def test_only_the_configured_origin_is_granted(temporal_client, weft_config):
    async with api_stack(temporal_client, weft_config, "tq-cors", cors_origin=ORIGIN) as stack:
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as browser:
            allowed = await browser.options("/threads", headers={"Origin": ORIGIN, **PREFLIGHT})
            assert allowed.status_code == 200, allowed.text
            assert allowed.headers["access-control-allow-origin"] == ORIGIN
            granted = allowed.headers["access-control-allow-headers"].lower()
            assert {"authorization", "idempotency-key"} <= {h.strip() for h in granted.split(",")}

            other = "https://evil.example.net"
            refused = await browser.options("/threads", headers={"Origin": other, **PREFLIGHT})
            assert refused.status_code == 400
            assert "access-control-allow-origin" not in refused.headers

        read = await stack.http.get("/threads", headers={"Origin": ORIGIN})
        assert read.status_code == 200, read.text
        assert read.headers["access-control-allow-origin"] == ORIGIN
        foreign = await stack.http.get("/threads", headers={"Origin": "https://evil.example.net"})
        assert "access-control-allow-origin" not in foreign.headers

        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as anonymous:
            # A simple cross-origin request still needs the token: CORS grants no access.
            blocked = await anonymous.get("/threads", headers={"Origin": ORIGIN})
            assert blocked.status_code == 401


async def test_no_origin_is_granted_by_default(temporal_client, weft_config):
    async with api_stack(temporal_client, weft_config, "tq-cors-none") as stack:
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as browser:
            preflight = await browser.options("/threads", headers={"Origin": ORIGIN, **PREFLIGHT})
            assert "access-control-allow-origin" not in preflight.headers
        read = await stack.http.get("/threads", headers={"Origin": ORIGIN})
        assert "access-control-allow-origin" not in read.headers
