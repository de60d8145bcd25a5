"""The embedded dev stack: the bundled Temporal dev server (when nothing listens at the
configured address), search attributes, and a worker with the scripted model server."""

from __future__ import annotations

from types import TracebackType

from temporalio.client import Client

from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import WeftConfig
from weft.workers.dev_server import DevServer, is_listening
from weft.workers.search_attributes import ensure_search_attributes
from weft.workers.secrets import ensure_dev_keys


class DevStack:
    """`async with DevStack(config) as stack:` gives a running worker on a Temporal server.

    Only what this object started is stopped on exit.
    """

    def __init__(self, config: WeftConfig, *, ui: bool = True) -> None:
        self._config = config
        self._ui = ui
        self._server: DevServer | None = None
        self._worker: AgentWorker | None = None
        self.client: Client | None = None

    @property
    def started_server(self) -> bool:
        """Whether this stack started the dev server (and so will stop it)."""
        return self._server is not None

    @property
    def ui_url(self) -> str:
        """The Temporal UI's base URL (the bundled server's UI port)."""
        host = self._config.temporal.address.rpartition(":")[0] or "127.0.0.1"
        return f"http://{host}:{self._config.temporal.dev_server.ui_port}"

    @property
    def worker(self) -> AgentWorker:
        """The running worker."""
        if self._worker is None:
            raise RuntimeError("the dev stack is not started")
        return self._worker

    def thread_url(self, thread_id: str) -> str:
        """The Temporal UI page of a thread."""
        namespace = self._config.temporal.namespace
        return f"{self.ui_url}/namespaces/{namespace}/workflows/{thread_id}"

    async def __aenter__(self) -> DevStack:
        temporal = self._config.temporal
        try:
            if not is_listening(temporal.address):
                dev = temporal.dev_server.model_copy()
                if dev.db_file:
                    dev.db_file = str(self._config.path(dev.db_file))
                self._server = DevServer(
                    dev,
                    address=temporal.address,
                    namespace=temporal.namespace,
                    ui=self._ui,
                    log_file=self._config.path(".weft/temporal-dev.log"),
                )
                await self._server.start()
            # The dev stack encrypts env from the start: a key is made on first use.
            keyring = ensure_dev_keys(self._config)
            self.client = await connect(
                temporal.address,
                namespace=temporal.namespace,
                api_key=temporal.api_key,
                tls=temporal.tls,
                keyring=keyring,
                encrypt=self._config.codec.encrypt,
            )
            await ensure_search_attributes(self.client, temporal.namespace)
            self._worker = AgentWorker(self.client, self._config)
            await self._worker.__aenter__()
        except BaseException:
            await self._stop_server()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._worker is not None:
                await self._worker.__aexit__(exc_type, exc, tb)
        finally:
            await self._stop_server()

    async def _stop_server(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None


__all__ = ["DevStack"]
