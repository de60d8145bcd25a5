"""Where `weft dev`, `weft demo` and `weft worker` find the demo when the user names no
definitions: in the installed package, not under the current directory."""

from __future__ import annotations

from pathlib import Path

from weft.workers.config import ConfigError, ProviderConfig, WeftConfig

DEMO = Path(__file__).resolve().parent
DEFINITIONS = DEMO / "definitions"
SCRIPTS = DEMO / "scripts"

# The checkout-relative paths of the defaults and of the checkout's temporal-dev.yml: they
# only exist in a checkout, so anywhere else they mean "the demo", wherever it is installed.
DEFAULT_DEFINITIONS = "workers/demo/definitions"
DEFAULT_SCRIPTS = "workers/demo/scripts"
HOW_TO_POINT = (
    "point weft at your definitions with --definitions DIR or WEFT_DEFINITIONS=DIR "
    "(or `definitions:` in temporal-dev.yml)"
)


def with_demo_defaults(config: WeftConfig) -> WeftConfig:
    """The config with the demo's definitions and scripts found in the package when the
    defaults do not exist where they are looked for; a missing directory the user named is
    a ConfigError that says how to name another."""
    configured = config.path(config.definitions)
    if not configured.is_dir():
        if config.definitions != DEFAULT_DEFINITIONS:
            raise ConfigError(f"definitions: {configured} does not exist; {HOW_TO_POINT}")
        config.definitions = str(DEFINITIONS)
    for provider in config.providers.values():
        if (
            provider.kind == "scripted"
            and provider.scripts == DEFAULT_SCRIPTS
            and not config.path(provider.scripts).is_dir()
        ):
            provider.scripts = str(SCRIPTS)
    if uses_demo(config) and "scripted" not in config.providers:
        # The demo's models name the `scripted` provider: without a config file there is
        # none, and the demo must run with no API key.
        config.providers["scripted"] = ProviderConfig(kind="scripted", scripts=str(SCRIPTS))
    return config


def uses_demo(config: WeftConfig) -> bool:
    """Whether the configured definitions are the demo's (the package's or a checkout's)."""
    configured = config.path(config.definitions).resolve()
    return configured == DEFINITIONS or config.definitions == DEFAULT_DEFINITIONS


__all__ = ["DEFINITIONS", "HOW_TO_POINT", "SCRIPTS", "uses_demo", "with_demo_defaults"]
