"""`weft deploy …` (a worker deployment's versions, promotion, draining) and the worker
flags that join a deployment (`--deployment`, `--build-id`); docs/deploys.md."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.client.deploys import DeployError, DeploymentStatus, Deploys, DrainReport
from weft.workers.config import DeploymentConfig, WeftConfig


def register(commands: Any) -> None:
    """Add `weft deploy` and its actions to the `weft` subcommands."""
    deploy = commands.add_parser(
        "deploy", help="worker deployment versions: status, promote, drain (docs/deploys.md)"
    )
    deploy.add_argument("--deployment", help="deployment name (default: deployment.name)")
    deploy.add_argument("--json", action="store_true", help="print JSON")
    actions = deploy.add_subparsers(dest="deploy_action", required=True)
    status = actions.add_parser("status", help="versions, current/ramping, threads on each")
    status.set_defaults(handler=_status)
    promote = actions.add_parser(
        "promote", help="make a version current (or ramp it to a percent of new threads)"
    )
    promote.add_argument("build_id")
    promote.add_argument("--ramp", type=float, metavar="PERCENT", help="ramp, not current")
    promote.set_defaults(handler=_promote)
    drain = actions.add_parser(
        "drain-report", help="threads still on a version, when each next moves; may it stop"
    )
    drain.add_argument("build_id")
    drain.add_argument(
        "--wake",
        action="store_true",
        help="first signal the version's idle threads so they move now",
    )
    drain.set_defaults(handler=_drain_report)


def add_worker_flags(parser: argparse.ArgumentParser) -> None:
    """`--deployment` and `--build-id` of `weft worker` / `weft dev`."""
    parser.add_argument(
        "--deployment",
        help="join this Temporal worker deployment (default: deployment.name; none: "
        "an unversioned worker)",
    )
    parser.add_argument(
        "--build-id", help="this worker's build id (default: weft-<version>-<definitions digest>)"
    )


def apply_worker_flags(args: argparse.Namespace, config: WeftConfig) -> None:
    """The worker flags over the config's `deployment` section (checked as the file is)."""
    given = {
        "name": getattr(args, "deployment", None),
        "build_id": getattr(args, "build_id", None),
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


async def _status(args: argparse.Namespace, config: WeftConfig) -> int:
    status = await (await _deploys(args, config)).status()
    print(json.dumps(asdict(status), indent=2) if args.json else render_status(status))
    return 0


async def _promote(args: argparse.Namespace, config: WeftConfig) -> int:
    deploys = await _deploys(args, config)
    await deploys.promote(args.build_id, ramp=args.ramp)
    role = "current" if args.ramp is None else f"ramping at {args.ramp:g}%"
    print(f"weft deploy: {deploys.name}.{args.build_id} is {role}")
    return 0


async def _drain_report(args: argparse.Namespace, config: WeftConfig) -> int:
    deploys = await _deploys(args, config)
    if args.wake:
        woken = await deploys.wake(args.build_id)
        if not args.json:
            print(f"weft deploy: woke {len(woken)} idle thread(s) on {args.build_id}")
    report = await deploys.drain_report(args.build_id)
    if args.json:
        print(json.dumps({**asdict(report), "mayStop": report.may_stop}, indent=2))
    else:
        print(render_drain(report))
    return 0


def render_status(status: DeploymentStatus) -> str:
    lines = [f"deployment {status.name}: current {status.current_build_id or '(none)'}"]
    for version in status.versions:
        role = "current" if version.current else ""
        if version.ramping_percent is not None:
            role = f"ramping {version.ramping_percent:g}%"
        lines.append(
            f"  {version.build_id:<32} {role:<12} {version.drainage:<12} "
            f"{version.threads} open thread(s)"
        )
    return "\n".join(lines)


def render_drain(report: DrainReport) -> str:
    if report.may_stop:
        verdict = "may stop: no open thread runs on it and it takes no new ones"
    elif report.current or report.ramping:
        verdict = "may not stop: it is current or ramping (promote another version first)"
    else:
        verdict = f"may not stop: {len(report.threads)} open thread(s) still run on it"
    lines = [f"version {report.build_id}: {verdict}"]
    for thread in report.threads:
        lines.append(
            f"  {thread.thread_id}  {thread.status or '?'}  moves {thread.next_safe_point}"
        )
    return "\n".join(lines)
