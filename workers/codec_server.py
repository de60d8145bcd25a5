"""`weft codec-server`: the payload codec over HTTP, for the Temporal UI and CLI.

It speaks Temporal's remote codec protocol (POST `/encode` and `/decode`, a JSON
`{"payloads": [...]}` body in proto3 JSON). Every codec call needs the bearer token, sent as
`Authorization: Bearer <token>` (the CLI's `--codec-auth`) or as the cookie that `/login`
sets for a browser (the UI's "include cross-origin credentials"). Cross-origin requests are
answered only for the one configured UI origin.
"""

from __future__ import annotations

import hmac
import html
import json
import threading
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from weft.activities.crypto import CryptoKeyError
from weft.transport.codec import EncryptionCodec

COOKIE = "weft_codec"
MAX_BODY_BYTES = 64 * 1024 * 1024
_LOGIN_FORM = """<!doctype html><title>weft codec server</title>
<form method="post" action="/login"><p>{message}</p>
<label>Codec token <input name="token" type="password" autofocus></label>
<button>Sign in</button></form>
"""


class CodecServer:
    """A threaded HTTP server around an `EncryptionCodec`; `start()` / `stop()` or `with`."""

    def __init__(
        self,
        codec: EncryptionCodec,
        *,
        token: str,
        allow_origin: str,
        host: str = "127.0.0.1",
        port: int = 8081,
    ) -> None:
        if not token:
            raise ValueError("the codec server needs a bearer token")
        self.codec = codec
        self.token = token
        self.allow_origin = allow_origin.rstrip("/")
        self._httpd = _HTTPServer((host, port), _Handler, self)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL: give it to `--codec-endpoint` and the UI's codec endpoint."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self) -> None:
        """Serve on this thread until `stop()`."""
        self._httpd.serve_forever()

    def start(self) -> CodecServer:
        """Serve on a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True, name="codec")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> CodecServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def authorised(self, authorization: str | None, cookie: str | None) -> bool:
        """Whether the request carries the token (header or login cookie)."""
        presented = ""
        if authorization and authorization.lower().startswith("bearer "):
            presented = authorization[len("bearer ") :].strip()
        elif cookie:
            morsel = SimpleCookie(cookie).get(COOKIE)
            presented = morsel.value if morsel is not None else ""
        return bool(presented) and hmac.compare_digest(presented.encode(), self.token.encode())

    def transform(self, path: str, body: bytes) -> bytes:
        """Encode or decode a proto3-JSON `Payloads` body."""
        payloads = json_format.Parse(body, Payloads())
        items = list(payloads.payloads)
        # A remote encode is an explicit request: everything not yet encrypted is sealed.
        if path == "/encode":
            result = self.codec.encode_sync(items, force=True)
        else:
            result = self.codec.decode_sync(items)
        # Always a `payloads` list, also when empty (the UI reads it unconditionally).
        return json.dumps({"payloads": [json_format.MessageToDict(p) for p in result]}).encode()


class _HTTPServer(ThreadingHTTPServer):
    """The stdlib threading server, carrying the `CodecServer` its handlers answer for."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        codec_server: CodecServer,
    ) -> None:
        self.codec_server = codec_server
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    server_version = "weft-codec"

    @property
    def _app(self) -> CodecServer:
        server = self.server
        # Only `_HTTPServer` creates these handlers; the check types `server` for mypy.
        assert isinstance(server, _HTTPServer)
        return server.codec_server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no per-request logging: bodies are never logged, and paths say little

    # -- CORS --------------------------------------------------------------------------

    def _origin_allowed(self) -> bool:
        origin = self.headers.get("Origin")
        return origin is None or origin.rstrip("/") == self._app.allow_origin

    def _cors_headers(self) -> None:
        if self.headers.get("Origin") is not None and self._origin_allowed():
            self.send_header("Access-Control-Allow-Origin", self._app.allow_origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Vary", "Origin")

    def do_OPTIONS(self) -> None:
        if not self._origin_allowed():
            self._reply(HTTPStatus.FORBIDDEN, b'{"error": "origin not allowed"}')
            return
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors_headers()
        self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    # -- codec -------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/login":
            self._login()
            return
        if path not in ("/encode", "/decode"):
            self._reply(HTTPStatus.NOT_FOUND, b'{"error": "POST /encode or /decode"}')
            return
        if not self._origin_allowed():
            self._reply(HTTPStatus.FORBIDDEN, b'{"error": "origin not allowed"}')
            return
        if not self._app.authorised(self.headers.get("Authorization"), self.headers.get("Cookie")):
            self._reply(HTTPStatus.UNAUTHORIZED, b'{"error": "bearer token required"}')
            return
        body = self._body()
        if body is None:
            return
        try:
            reply = self._app.transform(path, body)
        except json_format.ParseError as err:
            self._reply(HTTPStatus.BAD_REQUEST, _error(f"not a Payloads JSON body: {err}"))
            return
        except CryptoKeyError as err:
            self._reply(HTTPStatus.BAD_REQUEST, _error(str(err)))
            return
        self._reply(HTTPStatus.OK, reply)

    def _body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b'{"error": "bad Content-Length"}')
            return None
        return self.rfile.read(length)

    # -- browser login -----------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != "/login":
            self._reply(HTTPStatus.NOT_FOUND, b'{"error": "not found"}')
            return
        self._page(HTTPStatus.OK, "Sign in to let the Temporal UI decode weft payloads.")

    def _login(self) -> None:
        # The form is this server's own page: a cross-site post is refused.
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") != f"http://{self.headers.get('Host')}":
            self._reply(HTTPStatus.FORBIDDEN, b'{"error": "origin not allowed"}')
            return
        body = self._body()
        if body is None:
            return
        token = parse_qs(body.decode(errors="replace")).get("token", [""])[0]
        if not self._app.authorised(f"Bearer {token}", None):
            self._page(HTTPStatus.UNAUTHORIZED, "Wrong token.")
            return
        cookie = SimpleCookie()
        cookie[COOKIE] = token
        cookie[COOKIE]["httponly"] = True
        cookie[COOKIE]["samesite"] = "Strict"
        cookie[COOKIE]["path"] = "/"
        self.send_response(HTTPStatus.OK)
        self.send_header("Set-Cookie", cookie[COOKIE].OutputString())
        page = _LOGIN_FORM.format(message="Signed in: the Temporal UI can now decode payloads.")
        self._send_body(page.encode(), "text/html; charset=utf-8")

    def _page(self, status: HTTPStatus, message: str) -> None:
        self.send_response(status)
        self._send_body(
            _LOGIN_FORM.format(message=html.escape(message)).encode(), "text/html; charset=utf-8"
        )

    # -- plumbing ----------------------------------------------------------------------

    def _reply(self, status: HTTPStatus, body: bytes) -> None:
        self.send_response(status)
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="weft-codec"')
        self._cors_headers()
        self._send_body(body, "application/json")

    def _send_body(self, body: bytes, content_type: str) -> None:
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _error(message: str) -> bytes:
    return json.dumps({"error": message}).encode()


__all__ = ["COOKIE", "CodecServer"]
