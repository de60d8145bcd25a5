"""`weft serve`: the HTTP gateway (the §7.5 scoped-variable flow), on uvicorn."""

from weft.api.gateway.app import MAX_BODY_BYTES, VARIABLES_PATH, create_app
from weft.api.gateway.server import GatewayServer

__all__ = ["MAX_BODY_BYTES", "VARIABLES_PATH", "GatewayServer", "create_app"]
