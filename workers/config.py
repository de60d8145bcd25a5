"""Configuration: temporal-dev.yml, overridden by environment variables.

This module and the CLI are the only places that read the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from weft.activities.rate_limits import RateLimit
from weft.contract.validation import describe_validation_error

DEFAULT_CONFIG_FILE = "temporal-dev.yml"


class _Config(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")


class DevServerConfig(_Config):
    """The bundled Temporal dev server."""

    ui_port: int = 8233
    db_file: str | None = ".weft/temporal.db"
    search_attributes: dict[str, str] = Field(default_factory=dict)
    dynamic_config: dict[str, Any] = Field(default_factory=dict)


class TemporalConfig(_Config):
    """Where Temporal is and which task queue the agents use."""

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    # Not `agents`, the queue of `weft.Worker` without a config: a Python program run
    # beside `weft dev` must not have its threads taken by the CLI's worker, whose
    # definitions are others.
    task_queue: str = "weft-dev"
    api_key: str | None = None
    tls: bool = False
    dev_server: DevServerConfig = Field(default_factory=DevServerConfig)


class StoreConfig(_Config):
    """The store's SQLAlchemy URL (SQLite file by default, PostgreSQL beyond one machine)."""

    url: str = "sqlite:///.weft/weft.db"


class ProviderConfig(_Config):
    """One model provider: an HTTP API, or the embedded scripted model server."""

    kind: Literal["openai", "anthropic", "scripted"]
    base_url: str | None = None
    api_key: str | None = None
    scripts: str | None = None
    rate_limit: RateLimit | None = Field(
        default=None,
        description="requests and tokens per minute shared by every worker on the store "
        "(docs/rate-limits.md), e.g. {requestsPerMinute: 500, tokensPerMinute: 200000}",
    )

    def limit_key(self, name: str) -> str:
        """The key this provider's rate limit is shared under: its own, else its name."""
        return (self.rate_limit.key if self.rate_limit else None) or name


class CodecServerConfig(_Config):
    """`weft codec-server`: where it listens, who may call it (bearer token, UI origin)."""

    host: str = "127.0.0.1"
    port: int = 8081
    token: str | None = None
    allow_origin: str = "http://127.0.0.1:8233"


class CodecConfig(_Config):
    """Encryption of env values at rest (Temporal payloads and the store); see docs/secrets.md.

    `keys` (normally from WEFT_CODEC_KEYS) or the file `keys_file` hold `id:base64key`
    entries; the first one encrypts, all of them decrypt. Without keys nothing is encrypted.
    """

    keys: str | None = None
    keys_file: str | None = ".weft/codec.keys"
    encrypt: Literal["secrets", "all"] = "secrets"
    server: CodecServerConfig = Field(default_factory=CodecServerConfig)


class WorkerConfig(_Config):
    """How a worker recovers from failures; docs/recovery.md gives each value's trade-off.

    A thread's activity heartbeat timeout is not here: it travels with the thread
    (`options.heartbeatTimeoutSeconds`), so every worker treats a thread alike.
    """

    sticky_schedule_to_start_seconds: float = Field(
        default=1,
        gt=0,
        description="how long a thread's next workflow task waits for the worker that has it "
        "cached before any worker may take it: 1 s answers a killed worker's idle threads "
        "within about 2 s; a saturated worker's own tasks that wait longer are replayed from "
        "full history (docs/recovery.md)",
    )
    heartbeat_throttle_seconds: float = Field(
        default=1,
        gt=0,
        description="the most often an activity's heartbeats reach Temporal; must stay well "
        "below the threads' heartbeat timeout",
    )
    graceful_shutdown_seconds: float = Field(
        default=10,
        ge=0,
        description="on SIGTERM, how long running activities may finish before they are "
        "handed back",
    )
    gc_freeze: bool = Field(
        default=True,
        description="once the worker is built, keep the objects alive then out of later "
        "garbage collections (gc.freeze): a full collection then walks only what the "
        "worker made since, not its whole start-up state (workers/gc_policy.py)",
    )
    eager_activities: bool = Field(
        default=True,
        description="let Temporal hand a step's activity to this worker with the workflow "
        "task's reply, while the worker keeps up (eager_max_start_delay_share, "
        "eager_max_loop_lag_ms); saves a round trip per activity and about half of the "
        "server's work a step (docs/recovery.md)",
    )
    eager_max_start_delay_share: float | None = Field(
        default=0.25,
        gt=0,
        description="with eager_activities, take an activity eagerly only while the "
        "activities that reached this worker lately took at most this share of their "
        "heartbeat timeout to get here after Temporal marked them started (an eager "
        "task's heartbeat clock runs from then); null: no such limit",
    )
    eager_max_loop_lag_ms: float | None = Field(
        default=250,
        ge=0,
        description="with eager_activities, take an activity eagerly only while the "
        "worker's event loop runs at most this late; null: no such limit (with both "
        "limits null every eager task is taken, as the SDK does)",
    )


class DeploymentConfig(_Config):
    """Worker Versioning: the Temporal worker deployment a worker joins (docs/deploys.md).

    Without a `name` the worker is unversioned: every worker of the task queue takes every
    thread, and a deploy relies on `workflow.patched` alone.
    """

    name: str | None = Field(
        default=None,
        pattern=r"^[^.]+$",
        description="the worker deployment's name (no dots); None: an unversioned worker",
    )
    build_id: str | None = Field(
        default=None,
        min_length=1,
        description="this worker's build id; None: weft's version and a digest of the "
        "definitions (`weft-<version>-<12 hex>`)",
    )
    set_current_on_start: bool = Field(
        default=False,
        description="make this worker's version the deployment's current version once it "
        "polls (a single dev worker: threads run without a `weft deploy promote`)",
    )


class TracingConfig(_Config):
    """OpenTelemetry tracing (docs/observability.md). Off unless an exporter is chosen."""

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str | None = Field(
        default=None,
        description="the OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces",
    )
    service_name: str = "weft"
    content: bool = Field(
        default=False,
        description="record prompts, replies and tool arguments on spans (secrets are "
        "always redacted); off by default",
    )


class MetricsConfig(_Config):
    """Prometheus metrics served by `weft worker` (docs/observability.md)."""

    port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics here; None turns it off"
    )
    host: str = "127.0.0.1"


class TelemetryConfig(_Config):
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)


# Public-key algorithms only: never `none`, never HS* (a public key must not become a
# shared secret).
JwtAlgorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class JwtConfig(_Config):
    """OIDC/JWT bearer tokens accepted by `weft serve` (docs/tenants.md): who issues them,
    for which audience, where the issuer's public keys are, and which claims carry the
    tenant and the scopes."""

    issuer: str = Field(min_length=1, description="the `iss` every token must carry")
    audience: str = Field(min_length=1, description="the `aud` every token must carry")
    jwks_url: str = Field(
        description="the issuer's JSON Web Key Set; https, or http on a loopback address"
    )
    tenant_claim: str = Field(default="tenant", min_length=1)
    scopes_claim: str = Field(
        default="scope",
        min_length=1,
        description="a space-separated string or a list of strings; an unknown scope is refused",
    )
    scope_prefix: str = Field(
        default="",
        description="if set, only entries starting with it are weft's (the prefix "
        "removed); the claim's other entries (`openid`, `profile`, …) are ignored",
    )
    algorithms: list[JwtAlgorithm] = Field(default=["RS256", "ES256"], min_length=1)
    leeway_seconds: float = Field(default=30, ge=0, le=300)
    cache_seconds: float = Field(
        default=300, gt=0, description="how long fetched keys are used before a refetch"
    )
    min_refresh_seconds: float = Field(
        default=30,
        ge=0,
        description="the least time between two fetches of the key set (a flood of tokens "
        "naming unknown keys fetches it once)",
    )

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, url: str) -> str:
        parsed = urlsplit(url)
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise ValueError(f"must be an https:// URL, not {url!r}")
        if parsed.scheme == "http" and parsed.hostname not in LOOPBACK_HOSTS:
            # Keys fetched in the clear could be swapped for an attacker's on the way.
            raise ValueError(f"must be https:// (http only on a loopback address), not {url!r}")
        return url


class RequestLimitsConfig(_Config):
    """`serve.requestLimits`: requests a minute per credential and per tenant, held across
    every `weft serve` replica on the store (docs/http-api.md#replicas-behind-a-load-balancer)."""

    per_key_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="requests a minute from one API key or JWT subject; null: no cap",
    )
    per_tenant_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="requests a minute from one tenant's keys and JWTs together; null: no cap",
    )
    window_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="the window the limits are counted over; the per-minute figures are "
        "scaled to it (a window of 10 s admits a sixth of them in any 10 s)",
    )


class ServeConfig(_Config):
    """`weft serve`: what it accepts besides its token and API keys."""

    jwt: JwtConfig | None = None
    request_limits: RequestLimitsConfig | None = None


class WeftConfig(_Config):
    """Everything a worker, the CLI or the demo needs."""

    temporal: TemporalConfig = Field(default_factory=TemporalConfig)
    worker: WorkerConfig = Field(default_factory=WorkerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    codec: CodecConfig = Field(default_factory=CodecConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    definitions: str = "workers/demo/definitions"
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    root: Path = Field(default_factory=Path.cwd, exclude=True)

    def path(self, relative: str) -> Path:
        """A configured path, resolved against the config file's folder."""
        candidate = Path(relative)
        return candidate if candidate.is_absolute() else self.root / candidate

    def store_url(self) -> str:
        """The store URL with a relative SQLite path made absolute."""
        url = self.store.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/"):
            return prefix + str(self.path(url[len(prefix) :]))
        return url


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and field."""


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> WeftConfig:
    """Read the config file (if any) and apply environment overrides."""
    env = os.environ if environ is None else environ
    file = Path(path or env.get("WEFT_CONFIG") or DEFAULT_CONFIG_FILE)
    data: dict[str, Any] = {}
    if file.exists():
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{file}: invalid YAML: {err}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: must hold a mapping")
    elif path is not None:
        raise ConfigError(f"{file}: config file does not exist")
    try:
        config = WeftConfig.model_validate({**data, "root": file.resolve().parent})
    except ValidationError as err:
        raise ConfigError(f"{file}: {describe_validation_error(err)}") from None
    return _apply_env(config, env)


def _apply_env(config: WeftConfig, env: Mapping[str, str]) -> WeftConfig:
    temporal = config.temporal
    temporal.address = env.get("WEFT_TEMPORAL_ADDRESS", temporal.address)
    temporal.namespace = env.get("WEFT_NAMESPACE", temporal.namespace)
    temporal.task_queue = env.get("WEFT_TASK_QUEUE", temporal.task_queue)
    config.store.url = env.get("WEFT_STORE_URL", config.store.url)
    deployment = config.deployment
    deployment.name = env.get("WEFT_DEPLOYMENT_NAME", deployment.name)
    deployment.build_id = env.get("WEFT_BUILD_ID", deployment.build_id)
    config.definitions = env.get("WEFT_DEFINITIONS", config.definitions)
    codec = config.codec
    codec.keys = env.get("WEFT_CODEC_KEYS", codec.keys)
    codec.keys_file = env.get("WEFT_CODEC_KEYS_FILE", codec.keys_file)
    # A match, not `in`: mypy narrows the str to the Literal only through literal patterns.
    match env.get("WEFT_CODEC_ENCRYPT", codec.encrypt):
        case "secrets" | "all" as encrypt:
            codec.encrypt = encrypt
        case other:
            raise ConfigError(f"WEFT_CODEC_ENCRYPT: must be 'secrets' or 'all', not {other!r}")
    codec.server.token = env.get("WEFT_CODEC_TOKEN", codec.server.token)
    codec.server.allow_origin = env.get("WEFT_CODEC_ALLOW_ORIGIN", codec.server.allow_origin)
    for name, prefix in (("openai", "OPENAI"), ("anthropic", "ANTHROPIC")):
        provider = config.providers.get(name)
        base_url, api_key = env.get(f"{prefix}_BASE_URL"), env.get(f"{prefix}_API_KEY")
        if provider is None and (base_url or api_key):
            provider = config.providers[name] = ProviderConfig(kind=name)
        if provider is not None:
            provider.base_url = base_url or provider.base_url
            provider.api_key = api_key or provider.api_key
    return config
