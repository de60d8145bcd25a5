"""`weft deploy …` (a worker deployment's versions, promotion, draining) and the worker
flags that join a deployment (`--deployment`, `--build-id`); docs/deploys.md."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from pydantic.alias_generators import to_camel

from weft.cli.temporal_client import client_from_config
from weft.client.deploys import DeployError, DeploymentStatus, Deploys, DrainReport
from weft.workers.config import DeploymentConfig, WeftConfig


def _deployment_name(text: str) -> str:
    """A `--deployment` value: Temporal spells a version `name.build`, so no dots."""
    if not text or "." in text:
        raise argparse.ArgumentTypeError(f"{text!r} must be non-empty, without dots")
    return text


def _build_id(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a build id must be non-empty")
    return text


def _percent(text: str) -> float:
    """A `--ramp` value: a percent above 0 and at most 100 (0 would ramp nothing)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(
            f"{text} is not a percent above 0 and at most 100 (to stop a ramp, promote the "
            "current version again)"
        )
    return value


def register(commands: Any) -> None:
    """Add `weft deploy` and its actions to the `weft` subcommands."""
    deploy = commands.add_parser(
        "deploy", help="worker deployment versions: status, promote, drain (docs/deploys.md)"
    )
    deploy.add_argument(
        "--deployment",
        type=_deployment_name,
        help="deployment name (default: deployment.name)",
    )
    deploy.add_argument("--json", action="store_true", help="print JSON")
    actions = deploy.add_subparsers(dest="deploy_action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="versions, current/ramping, threads on each")
    status.set_defaults(handler=_status)
    promote = actions.add_parser(
        "promote", help="make a version current (or ramp it to a percent of new threads)"
    )
    promote.add_argument("build_id", type=_build_id, metavar="BUILD_ID")
    promote.add_argument(
        "--ramp",
        type=_percent,
        metavar="PERCENT",
        help="ramp it for this percent of new threads and moves (above 0, at most 100), "
        "rather than make it current",
    )
    promote.set_defaults(handler=_promote)
    drain = actions.add_parser(
        "drain-report", help="threads still on a version, when each next moves; may it stop"
    )
    drain.add_argument("build_id", type=_build_id, metavar="BUILD_ID")
    drain.add_argument(
        "--wake",
        action="store_true",
        help="first signal the version's idle threads so they move now",
    )
    drain.set_defaults(handler=_drain_report)


def add_worker_flags(parser: argparse.ArgumentParser) -> None:
    """`--deployment` and `--build-id` of `weft worker` / `weft dev`."""
    # Their own dests: `weft deploy` has a `--deployment` and a BUILD_ID of its own, which
    # name what to act on, not the deployment this process joins.
    parser.add_argument(
        "--deployment",
        dest="worker_deployment",
        type=_deployment_name,
        help="join this Temporal worker deployment (default: deployment.name; none: "
        "an unversioned worker)",
    )
    parser.add_argument(
        "--build-id",
        dest="worker_build_id",
        type=_build_id,
        help="this worker's build id (default: weft-<version>-<definitions digest>)",
    )


def apply_worker_flags(args: argparse.Namespace, config: WeftConfig) -> None:
    """The worker flags over the config's `deployment` section (checked as the file is)."""
    given = {
        "name": getattr(args, "worker_deployment", None),
        "build_id": getattr(args, "worker_build_id", None),
    }
    changes = {key: value for key, value in given.items() if value is not None}
    if changes:
        config.deployment = DeploymentConfig.model_validate(
            {**config.deployment.model_dump(), **changes}
        )


async def _deploys(args: argparse.Namespace, config: WeftConfig) -> Deploys:
    name = args.deployment or config.deployment.name
    if not name:
        raise DeployError("no deployment: give --deployment NAME or set deployment.name")
    return Deploys(await client_from_config(config), name)


def _json(value: Any) -> str:
    """A report as JSON with camelCase keys, as `GET /deployments/{name}` writes them."""
    return json.dumps(_camel(value), indent=2)


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {to_camel(key): _camel(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_camel(item) for item in value]
    return value


async def _status(args: argparse.Namespace, config: WeftConfig) -> int:
    status = await (await _deploys(args, config)).status()
    print(_json(asdict(status)) if args.json else render_status(status))
    return 0


async def _promote(args: argparse.Namespace, config: WeftConfig) -> int:
    deploys = await _deploys(args, config)
    changed = await deploys.promote(args.build_id, ramp=args.ramp)
    version = f"{deploys.name}.{args.build_id}"
    if not changed:
        print(f"weft deploy: {version} is already current; nothing changed")
    elif args.ramp is None:
        print(
            f"weft deploy: {version} is current: new threads start on it, running ones "
            "move at their next safe point"
        )
    else:
        print(f"weft deploy: {version} is ramping at {args.ramp:g}% of new threads and moves")
    return 0


async def _drain_report(args: argparse.Namespace, config: WeftConfig) -> int:
    deploys = await _deploys(args, config)
    if args.wake:
        woken = await deploys.wake(args.build_id)
        if not args.json:
            print(f"weft deploy: woke {len(woken)} idle thread(s) on {args.build_id}")
    report = await deploys.drain_report(args.build_id)
    if args.json:
        print(_json({**asdict(report), "may_stop": report.may_stop}))
    else:
        print(render_drain(report))
    return 0


def render_status(status: DeploymentStatus) -> str:
    lines = [f"deployment {status.name}: current {status.current_build_id or '(none)'}"]
    for version in status.versions:
        role = "current" if version.current else ""
        if version.ramping_percent is not None:
            role = f"ramping {version.ramping_percent:g}%"
        # Temporal says `unspecified` of a version it has not started draining: noise here.
        drainage = "" if version.drainage == "unspecified" else version.drainage
        lines.append(
            f"  {version.build_id:<32} {role:<12} {drainage:<12} {version.threads} open thread(s)"
        )
    return "\n".join(lines)


def render_drain(report: DrainReport) -> str:
    if report.may_stop:
        verdict = "may stop: no open thread runs on it and it takes no new ones"
    elif report.current or report.ramping:
        if report.current:
            role, remedy = "the current version", "promote another version first"
        else:
            role, remedy = "ramping", "promote the current version again to stop the ramp"
        verdict = (
            f"may not stop: it is {role} and takes new threads ({remedy}); "
            f"{len(report.threads)} open thread(s) run on it"
        )
    else:
        verdict = f"may not stop: {len(report.threads)} open thread(s) still run on it"
    lines = [f"version {report.build_id}: {verdict}"]
    for thread in report.threads:
        lines.append(
            f"  {thread.thread_id}  {thread.status or '?'}  moves {thread.next_safe_point}"
        )
    return "\n".join(lines)
