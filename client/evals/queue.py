"""The eval's task queue must be its own: replayed tools are served from the eval
worker's memory, so a case whose tool call another worker picks up would run it for real.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client


class EvalQueueError(RuntimeError):
    """The eval's task queue is polled by a worker that is not the eval's."""


async def pollers(client: Client, queue: str) -> set[str]:
    """The identities polling `queue` for workflow or activity tasks (Temporal keeps a
    poller listed for a few minutes after its last poll)."""
    found: set[str] = set()
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                task_queue_type=kind,
            )
        )
        found |= {poller.identity for poller in described.pollers}
    return found


async def require_own_queue(client: Client, queue: str, ours: str) -> None:
    """Refuse, naming them, when workers other than the eval's (`ours`) poll `queue`."""
    others = sorted(await pollers(client, queue) - {ours})
    if others:
        raise EvalQueueError(
            f"task queue {queue!r} is also polled by {', '.join(others)}, which cannot serve "
            "this eval's replayed tools (it would run them for real) nor its definitions "
            "under test; stop those workers or leave the eval its own queue (the default)"
        )
