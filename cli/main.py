"""The `weft` command line: the dev stack, workers, threads, the demo and runCode."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import traceback
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from weft.cli import (
    ask_command,
    audit_command,
    budget_command,
    bundle_command,
    code_command,
    codec_command,
    delete_command,
    deploy_command,
    effects_command,
    eval_command,
    fork_command,
    inbox_command,
    interrupt_command,
    inventory_command,
    job_command,
    key_command,
    list_command,
    quota_command,
    respond_command,
    retention_command,
    schedule_command,
    send_command,
    serve_command,
    subagents_command,
    tail_command,
    task_command,
    upgrade_command,
)
from weft.cli.parser import CommandParser
from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import (
    TENANT_VARIABLE,
    ThreadError,
    acting_threads,
    check_new_thread_id,
    confine_to_tenant,
    run_thread_command,
)
from weft.client import resume
from weft.client.starts import ThreadStartRefused, start_confirmed
from weft.client.threads import Threads
from weft.contract.validation import describe_validation_error
from weft.definitions import DefinitionError
from weft.store import Store
from weft.workers.config import ConfigError, WeftConfig, WorkerConfig, load_config
from weft.workers.dev_server import DevServerError

if TYPE_CHECKING:  # imported where a worker runs: other commands need not load it
    from weft.workers.agent_worker import AgentWorker

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `weft` console script."""
    code = run(argv)
    # The Temporal client's native runtime threads can still call into Python while the
    # interpreter finalizes, which aborts the process (PyGILState_Release) after the work
    # is done. Everything is flushed and closed by now, so leave without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the command; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        confine_to_tenant(args)  # whom the CLI acts for: every tenant, or one
        config = apply_recovery_flags(args, load_config(args.config))
    except (ConfigError, ValueError) as err:
        return _fail(args, str(err), EXIT_USAGE)
    if getattr(args, "definitions", None):
        config.definitions = args.definitions
    if getattr(args, "metrics_port", None) is not None:
        config.telemetry.metrics.port = args.metrics_port
    handler = args.handler
    if handler is code_command.run:
        return int(handler(args))
    try:
        deploy_command.apply_worker_flags(args, config)
        if args.command == "thread" and (
            getattr(args, "thread_id", None) is not None or getattr(args, "target", None)
        ):
            # Every command on one thread: an unknown or closed thread (or another
            # tenant's, under --tenant) is one line.
            return asyncio.run(run_thread_command(handler, args, config))
        return int(asyncio.run(handler(args, config)) or 0)
    except KeyboardInterrupt:
        return 130
    except ThreadError as err:
        return _fail(args, str(err), 1)
    except RPCError as err:
        return _fail(args, f"Temporal refused the request: {err.message}", 1)
    except ValidationError as err:
        # A model built from the flags: its first problem, by field, on one line.
        return _fail(args, describe_validation_error(err, limit=1), 1)
    except (DefinitionError, DevServerError, ValueError, RuntimeError) as err:
        # Bad definitions or set-up: one clear line, not a traceback.
        return _fail(args, str(err), 1)
    except Exception as err:  # anything else is still one line; --debug shows where
        return _fail(args, f"{type(err).__name__}: {err}", 1)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Print `message` as a `weft:` line (the traceback first with --debug).

    Errors are one line; the few that say how to fix them (the search-attribute commands to
    run) keep those lines below it, since cutting them would leave the user nothing to run.
    """
    if getattr(args, "debug", False) and sys.exc_info()[0] is not None:
        traceback.print_exc()
    first, *rest = str(message).strip().splitlines() or [""]
    print("\n".join([f"weft: {first}", *rest]), file=sys.stderr)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="weft", description="Durable agent threads on Temporal")
    parser.add_argument("--config", help="config file (default: $WEFT_CONFIG or temporal-dev.yml)")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error, not only its line"
    )
    parser.add_argument(
        "--tenant",
        dest="acting_tenant",
        metavar="T",
        help=f"act for tenant T only (default: ${TENANT_VARIABLE}; none: every tenant, as "
        "the operator): another tenant's threads are not found, listings show T's, starts "
        "are T's (docs/tenants.md)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="start the dev server if needed, and a worker")
    dev.add_argument("--definitions", help="definitions directory")
    _add_metrics_flag(dev)
    deploy_command.add_worker_flags(dev)
    dev.set_defaults(handler=_dev)

    worker = commands.add_parser("worker", help="run a worker")
    worker.add_argument("--definitions", help="definitions directory")
    _add_metrics_flag(worker)
    _add_recovery_flags(worker)
    deploy_command.add_worker_flags(worker)
    worker.set_defaults(handler=_worker)

    demo = commands.add_parser("demo", help="run the demo on the embedded dev stack")
    demo.set_defaults(handler=_demo)

    thread = commands.add_parser("thread", help="start, talk to and inspect threads")
    actions = thread.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a thread; prints its id")
    start.add_argument("agent")
    start.add_argument("-m", "--message", action="append", default=[], help="a user message")
    start.add_argument("--id", help="thread id (default: generated)")
    start.add_argument("--session", help="session id")
    start.add_argument(
        "--tenant", help="the tenant the thread belongs to (default: default; docs/tenants.md)"
    )
    start.set_defaults(handler=_thread_start)
    send_command.register(actions)
    show = actions.add_parser(
        "show", help="print the thread read model as JSON (from the store if closed)"
    )
    show.add_argument("thread_id")
    show.set_defaults(handler=_thread_show, closed_ok=True)
    tail_command.register(actions)
    compact = actions.add_parser("compact", help="ask for a context compaction (compact signal)")
    compact.add_argument("thread_id")
    compact.add_argument("--reason", help="why, recorded with the request")
    compact.set_defaults(handler=_thread_compact)
    refresh = actions.add_parser(
        "refresh-tools",
        help="list the thread's MCP servers' tools again (refresh_tools signal)",
        description="Ask the thread to list its MCP servers' tools again before its next "
        "model call; each listing is recorded as a tool.catalog.resolved event. A server "
        "the thread does not define becomes a runtime.warning (unknown_mcp_server).",
    )
    refresh.add_argument("thread_id")
    refresh.add_argument(
        "--server",
        action="append",
        dest="servers",
        metavar="NAME",
        help="only this MCP server (repeat for more; default: every server of the thread)",
    )
    refresh.set_defaults(handler=_thread_refresh_tools)
    context = actions.add_parser(
        "context", help="print the context boundary snapshot as JSON (from the store if closed)"
    )
    context.add_argument("thread_id")
    context.set_defaults(handler=_thread_context, closed_ok=True)
    terminate = actions.add_parser("terminate", help="soft shutdown (terminate signal)")
    terminate.add_argument("thread_id")
    terminate.add_argument("--reason")
    terminate.set_defaults(handler=_thread_terminate)
    delete_command.register(actions)
    list_command.register(actions)
    ask_command.register(actions)
    respond_command.register(actions)
    budget_command.register(actions)
    effects_command.register(actions)
    inventory_command.register(actions)
    subagents_command.register(actions)
    interrupt_command.register(actions)
    upgrade_command.register(actions)
    bundle_command.register(actions)
    fork_command.register(actions)
    inbox_command.register(commands)
    eval_command.register(commands)
    schedule_command.register(commands)
    task_command.register(commands)
    job_command.register(commands)
    deploy_command.register(commands)

    code_command.register(commands)
    codec_command.register(commands)
    serve_command.register(commands)
    key_command.register(commands)
    audit_command.register(commands)
    delete_command.register_tenant(commands)
    quota_command.register(commands)  # under `weft tenant`: after register_tenant
    retention_command.register(commands)
    return parser


# `weft worker` flags over the config file's `worker:` section (docs/recovery.md).
RECOVERY_FLAGS = {
    "sticky_schedule_to_start": "sticky_schedule_to_start_seconds",
    "heartbeat_throttle": "heartbeat_throttle_seconds",
    "graceful_shutdown": "graceful_shutdown_seconds",
    "eager_activities": "eager_activities",
}


def _add_metrics_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (0: a free port, printed;"
        " HOST is telemetry.metrics.host, default 127.0.0.1; docs/observability.md)",
    )


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return int(text)


def _add_recovery_flags(parser: argparse.ArgumentParser) -> None:
    recovery = parser.add_argument_group("recovery (times in seconds; docs/recovery.md)")
    recovery.add_argument(
        "--sticky-schedule-to-start",
        type=float,
        metavar="S",
        help="how long a thread's next task waits for the worker caching it (default 5)",
    )
    recovery.add_argument(
        "--heartbeat-throttle",
        type=float,
        metavar="S",
        help="the most often activity heartbeats are sent (default 1)",
    )
    recovery.add_argument(
        "--graceful-shutdown",
        type=float,
        metavar="S",
        help="on SIGTERM, how long running activities may finish (default 10)",
    )
    recovery.add_argument(
        "--eager-activities",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take a step's activity with the workflow task's reply while the worker keeps "
        "up (default on; --no-eager-activities: every activity through Temporal's queue)",
    )


def apply_recovery_flags(args: argparse.Namespace, config: WeftConfig) -> WeftConfig:
    """The config with the recovery flags given on the command line; a bad value is a
    ConfigError naming the flag."""
    for flag, field in RECOVERY_FLAGS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        try:
            config.worker = WorkerConfig.model_validate(
                {**config.worker.model_dump(), field: value}
            )
        except ValidationError as err:
            problem = err.errors()[0]["msg"]
            raise ConfigError(f"--{flag.replace('_', '-')}: {problem}") from None
    return config


async def _client(config: WeftConfig) -> Any:
    return await client_from_config(config)


async def _dev(args: argparse.Namespace, config: WeftConfig) -> int:
    from weft.workers.demo.defaults import HOW_TO_POINT, uses_demo, with_demo_defaults
    from weft.workers.dev_stack import DevStack

    config = with_demo_defaults(config)

    async def serve() -> int:
        async with DevStack(config, ui=True) as stack:
            print(
                f"weft dev: Temporal at {config.temporal.address}"
                f" ({'started here' if stack.started_server else 'already running'}),"
                f" UI {stack.ui_url}, task queue {config.temporal.task_queue}"
            )
            if uses_demo(config):
                print(f"weft dev: the demo's definitions ({config.definitions}); {HOW_TO_POINT}")
            _print_metrics_url("weft dev", stack.worker)
            print("weft dev: worker running; Ctrl-C stops what this command started", flush=True)
            try:
                await stack.worker.wait()
            finally:
                print("weft dev: stopping the worker, then what this command started", flush=True)
        return 0

    return await _until_stopped(serve())


async def _worker(args: argparse.Namespace, config: WeftConfig) -> int:
    from weft.workers.agent_worker import AgentWorker, load_definitions
    from weft.workers.demo.defaults import with_demo_defaults

    definitions = load_definitions(with_demo_defaults(config))  # fail fast, before connecting

    async def serve() -> int:
        client = await _client(config)
        # AgentWorker checks the search attributes first: it registers missing ones, or
        # raises SearchAttributesMissing (a RuntimeError: one message with the commands).
        async with AgentWorker(client, config, definitions=definitions) as worker:
            _print_metrics_url("weft worker", worker)
            version = worker.deployment_version
            joined = f" as {version.to_canonical_string()}" if version else ""
            print(
                f"weft worker: polling {worker.task_queue} on {config.temporal.address}{joined}",
                flush=True,
            )
            await worker.wait()
        return 0

    return await _until_stopped(serve())


def _print_metrics_url(command: str, worker: AgentWorker) -> None:
    if worker.metrics is not None:
        print(f"{command}: metrics at {worker.metrics.url}", flush=True)


async def _demo(args: argparse.Namespace, config: WeftConfig) -> int:
    from weft.cli.demo import run_demo
    from weft.workers.demo.defaults import with_demo_defaults

    return await _until_stopped(run_demo(with_demo_defaults(config), sys.stdout), stopped=130)


async def _thread_start(args: argparse.Namespace, config: WeftConfig) -> int:
    """Start the thread and wait for a worker to accept it: a refusal (an unknown agent, a
    missing variable) exits 1 with the worker's reason; no verdict in time is only a note,
    since a worker that comes later runs the thread."""
    await check_new_thread_id(args, config, args.id)
    async with acting_threads(config) as threads:
        try:
            started = await start_confirmed(
                threads,
                args.agent,
                messages=args.message,
                thread_id=args.id,
                session_id=args.session,
                **({"tenant": args.tenant} if args.tenant else {}),
            )
        except ThreadStartRefused as err:
            print(f"weft: thread {err.thread_id!r} refused: {err.reason}", file=sys.stderr)
            return 1
        except WorkflowAlreadyStartedError:
            print(f"weft: thread {args.id!r} already exists", file=sys.stderr)
            return 1
    print(started.thread_id)
    if not started.confirmed:
        print(
            f"weft: no worker has picked up {started.thread_id} yet (task queue "
            f"{config.temporal.task_queue}); it runs when one does",
            file=sys.stderr,
        )
    return 0


@contextmanager
def _store(config: WeftConfig) -> Iterator[Store]:
    """The configured store: blobs for content over 64 KiB, and what closed threads left."""
    store = Store.open(config.store_url())
    try:
        yield store
    finally:
        store.close()


async def _thread_show(args: argparse.Namespace, config: WeftConfig) -> int:
    """The live read model, or the one a closed thread (or an unanswered one) last stored."""
    with _store(config) as store:
        state = await resume.thread_read(await _client(config), store, args.thread_id)
    if state is None:
        print(f"weft: thread {args.thread_id!r} has no read model yet", file=sys.stderr)
        return 1
    print(state.model_dump_json(indent=2, by_alias=True))
    return 0


async def _thread_terminate(args: argparse.Namespace, config: WeftConfig) -> int:
    async with acting_threads(config) as threads:
        await threads.terminate(args.thread_id, args.reason)
    # The signal is sent; the thread finishes what it must, then closes (tail shows it end).
    print(f"terminate sent to {args.thread_id}: it closes once its work in flight stops")
    return 0


async def _thread_compact(args: argparse.Namespace, config: WeftConfig) -> int:
    async with acting_threads(config) as threads:
        await threads.compact(args.thread_id, args.reason)
    print(f"compaction requested for {args.thread_id}")
    return 0


async def _thread_refresh_tools(args: argparse.Namespace, config: WeftConfig) -> int:
    async with acting_threads(config) as threads:
        await threads.refresh_tools(args.thread_id, args.servers)
    which = ", ".join(args.servers) if args.servers else "all MCP servers"
    print(f"tool refresh requested for {args.thread_id} ({which})")
    return 0


async def _thread_context(args: argparse.Namespace, config: WeftConfig) -> int:
    with _store(config) as store:
        threads = Threads(await _client(config), task_queue=config.temporal.task_queue, store=store)
        snapshot = await threads.context(args.thread_id)
    if snapshot is None:
        # The guard found the thread, but no worker answered and the store has nothing yet.
        print(f"weft: thread {args.thread_id!r} has no context snapshot yet", file=sys.stderr)
        return 1
    print(json.dumps(snapshot, indent=2))
    return 0


# SIGHUP too: a terminal that closes stops `weft dev` cleanly, not by the default action,
# which would leave the dev server (in its own session) running.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _until_stopped(body: Coroutine[Any, Any, int], *, stopped: int = 0) -> int:
    """Run `body` (start, serve, stop what it started); the first SIGINT, SIGTERM or SIGHUP
    cancels it, so its `async with` blocks stop what they started, and returns `stopped`.

    The handlers are in place before `body` starts anything: a signal while the dev server
    starts would otherwise kill this process and orphan the server. A SIGHUP ignored from
    the start (`nohup`) stays ignored, as its user asked.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(body)
    signalled = False

    def stop() -> None:
        nonlocal signalled
        if not signalled:  # a second signal must not cut the clean stop short
            signalled = True
            task.cancel()

    handled = [
        sig
        for sig in STOP_SIGNALS
        if not (sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN)
    ]
    for sig in handled:
        loop.add_signal_handler(sig, stop)
    try:
        return await task
    except asyncio.CancelledError:
        if not signalled:
            raise
        return stopped
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


if __name__ == "__main__":
    raise SystemExit(main())
