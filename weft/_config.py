"""How the public API turns its arguments (and a few environment variables) into the
`WeftConfig` that workers and the CLI already use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weft.workers.config import (
    CodecConfig,
    DeploymentConfig,
    ProviderConfig,
    WeftConfig,
    load_config,
)

DEFAULT_STORE = "sqlite:///weft.db"
DEFAULT_TASK_QUEUE = "agents"
DEFAULT_ADDRESS = "localhost:7233"
# Under the root (the current directory unless given): the file `weft dev` writes its key to.
KEYS_FILE = ".weft/codec.keys"
_DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}

ProviderSpec = ProviderConfig | Mapping[str, Any]


def root_of(root: str | os.PathLike[str] | None) -> Path:
    """The folder relative paths (store file, keys file, definitions) are resolved against."""
    return Path(root).resolve() if root is not None else Path.cwd()


def codec_config(keys: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> CodecConfig:
    """Where the encryption keys come from: `keys` (entries `id:base64key,...` as a str, or a
    keys file as a path), else $WEFT_CODEC_KEYS, else the keys file under the root if any."""
    if isinstance(keys, str):
        return CodecConfig(keys=keys, keys_file=None)
    if keys is not None:
        return CodecConfig(keys=None, keys_file=str(Path(keys)))
    return CodecConfig(keys=environ.get("WEFT_CODEC_KEYS") or None, keys_file=KEYS_FILE)


def providers_from_env(environ: Mapping[str, str]) -> dict[str, ProviderConfig]:
    """`openai` / `anthropic` when their `*_BASE_URL` or `*_API_KEY` variable is set."""
    found: dict[str, ProviderConfig] = {}
    for kind, prefix in (("openai", "OPENAI"), ("anthropic", "ANTHROPIC")):
        base_url = environ.get(f"{prefix}_BASE_URL")
        api_key = environ.get(f"{prefix}_API_KEY")
        if base_url or api_key:
            found[kind] = ProviderConfig(
                kind=kind, base_url=base_url or _DEFAULT_BASE_URLS[kind], api_key=api_key
            )
    return found


def provider_configs(providers: Mapping[str, ProviderSpec]) -> dict[str, ProviderConfig]:
    """Validated provider entries; a dict uses the config file's keys (kind, baseUrl, ...)."""
    built: dict[str, ProviderConfig] = {}
    for name, entry in providers.items():
        if isinstance(entry, ProviderConfig):
            built[name] = entry
        else:
            try:
                built[name] = ProviderConfig.model_validate(dict(entry))
            except ValueError as err:
                raise ValueError(f"providers[{name!r}]: {err}") from None
    return built


def deployment_config(
    base: DeploymentConfig,
    *,
    name: str | None,
    build_id: str | None,
    set_current: bool | None,
) -> DeploymentConfig:
    """The worker deployment section with the given arguments over it (validated: a bad
    name is an error naming `deployment.name`)."""
    given = {"name": name, "build_id": build_id, "set_current_on_start": set_current}
    changes = {key: value for key, value in given.items() if value is not None}
    return DeploymentConfig.model_validate({**base.model_dump(), **changes})


def worker_config(
    *,
    config: WeftConfig | str | os.PathLike[str] | None,
    store: str | None,
    providers: Mapping[str, ProviderSpec] | None,
    task_queue: str | None,
    keys: str | os.PathLike[str] | None,
    root: str | os.PathLike[str] | None,
    environ: Mapping[str, str] | None = None,
) -> WeftConfig:
    """The worker's config: a given config (object or file), else defaults; arguments win."""
    env = os.environ if environ is None else environ
    if isinstance(config, WeftConfig):
        built = config.model_copy(deep=True)
    elif config is not None:
        built = load_config(Path(config), environ=env)
    else:
        built = WeftConfig(root=root_of(root), codec=codec_config(None, env))
        built.store.url = DEFAULT_STORE
        built.temporal.task_queue = DEFAULT_TASK_QUEUE
        built.providers = providers_from_env(env)
    if root is not None:
        built.root = root_of(root)
    if store is not None:
        built.store.url = store
    if providers is not None:
        built.providers = provider_configs(providers)
    if task_queue is not None:
        built.temporal.task_queue = task_queue
    if keys is not None:
        built.codec = codec_config(keys, env).model_copy(update={"encrypt": built.codec.encrypt})
    return built
