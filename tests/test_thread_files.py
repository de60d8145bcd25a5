"""Thread filesystems end to end: tools use ThreadState files, and `files.copy` runs on the
worker."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.worker import Worker

from weft.contract.activities import ACTIVITY_FILES_COPY, CopyFilesInput, CopyFilesResult
from weft.definitions import define_tool


class SaveArgs(BaseModel):
    """Arguments of the save tool."""

    path: str
    text: str


class PathArgs(BaseModel):
    """Arguments of the load tool."""

    path: str


async def save_file(state: Any, args: SaveArgs) -> dict[str, Any]:
    """Writes a text file and reports what the directory holds afterwards."""
    stat = await state.write_file(args.path, args.text)
    await state.mkdir_file("/scratch/empty")
    listing = await state.readdir_file(args.path.rsplit("/", 1)[0] or "/")
    return {"size": stat.size, "mime": stat.mime_type, "listing": [e.name for e in listing]}


async def load_file(state: Any, args: PathArgs) -> dict[str, Any]:
    """Reads a file back in a later step and searches the thread's files."""
    text = await state.read_file(args.path, encoding="utf-8")
    matches = await state.grep_files("secret", "*.txt")
    await state.rmdir_file("/scratch", recursive=True)
    return {
        "text": text,
        "found": await state.find_files("**"),
        "grep": [[m.path, m.line] for m in matches],
        "gone": await state.stat_file("/scratch") is None,
    }


def file_definitions(script: str) -> Any:
    """The test agent with the two file tools."""
    return agent_definitions(script, tools=["save_file", "load_file"]).add(
        define_tool(name="save_file", description="Save", args=SaveArgs, execute=save_file),
        define_tool(name="load_file", description="Load", args=PathArgs, execute=load_file),
    )


async def test_tools_write_and_read_thread_files(start_worker, temporal_client, scripted_server):
    """A file a tool writes in one step is read, found and grepped by a tool in a later one."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "save_file",
                            "arguments": {"path": "/notes/a.txt", "text": "x\nthe secret is 42"},
                        }
                    ]
                },
                {
                    "tool_calls": [
                        {"name": "load_file", "arguments": {"path": "/notes/a.txt"}},
                        {"name": "load_file", "arguments": {"path": "/notes/missing.txt"}},
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    worker = await start_worker(file_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "files"}]
    )
    await wait_until(handle, idle_after(1))
    tools = [
        json.loads(m.content) for m in worker.store.messages.list(handle.id) if m.role == "tool"
    ]
    assert tools[0] == {
        "status": "success",
        "result": {"size": 18, "mime": "text/plain", "listing": ["a.txt"]},
    }
    assert tools[1]["result"] == {
        "text": "x\nthe secret is 42",
        "found": ["/notes", "/notes/a.txt"],
        "grep": [["/notes/a.txt", 2]],
        "gone": True,
    }
    assert tools[2]["status"] == "error"
    assert f"no such file in thread '{handle.id}': /notes/missing.txt" in tools[2]["error"]
    assert worker.store.files.read_file(handle.id, "/notes/a.txt") == b"x\nthe secret is 42"
    with pytest.raises(FileNotFoundError):
        worker.store.files.read_file(f"other-{handle.id}", "/notes/a.txt")


@workflow.defn(sandboxed=False)
class CopyFilesWorkflow:
    """Runs `files.copy` on another task queue, as the thread workflow would."""

    @workflow.run
    async def run(self, task_queue: str, copy: CopyFilesInput) -> CopyFilesResult:
        result: CopyFilesResult = await workflow.execute_activity(
            ACTIVITY_FILES_COPY,
            copy,
            task_queue=task_queue,
            result_type=CopyFilesResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=5)),
        )
        return result


async def run_copy(
    temporal_client: Client, agent_queue: str, copy: CopyFilesInput
) -> CopyFilesResult:
    """Run one copy through the agent worker's `files.copy` activity."""
    queue = f"copy-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[CopyFilesWorkflow]):
        result: CopyFilesResult = await temporal_client.execute_workflow(
            CopyFilesWorkflow.run,
            args=[agent_queue, copy],
            id=f"copy-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
        )
        return result


async def test_files_copy_activity(start_worker, temporal_client, scripted_server):
    """files.copy on the worker copies by name with suffixes, and a repeat copies nothing."""
    worker = await start_worker(
        file_definitions(add_script(scripted_server, {"replies": [{"text": "unused"}]}))
    )
    files = worker.store.files
    parent, child = f"p-{uuid.uuid4().hex}", f"c-{uuid.uuid4().hex}"
    files.write_file(parent, "/out/report.pdf", b"%PDF parent")
    files.write_file(child, "/attachments/report.pdf", b"%PDF child")
    copy = CopyFilesInput(
        source_thread_id=parent,
        target_thread_id=child,
        paths=["/out/report.pdf"],
        copy_id="tool-call-1:copy",
    )
    first = await run_copy(temporal_client, worker.task_queue, copy)
    again = await run_copy(temporal_client, worker.task_queue, copy)
    assert first.paths == again.paths == ["/attachments/report-1.pdf"]
    assert files.read_file(child, "/attachments/report-1.pdf") == b"%PDF parent"
    assert files.find(child, "report*") == [
        "/attachments/report-1.pdf",
        "/attachments/report.pdf",
    ]


async def test_files_copy_of_missing_path_fails_once(
    start_worker, temporal_client, scripted_server
):
    """A missing source path fails files.copy non-retryably, naming the thread and path."""
    worker = await start_worker(
        file_definitions(add_script(scripted_server, {"replies": [{"text": "unused"}]}))
    )
    parent, child = f"p-{uuid.uuid4().hex}", f"c-{uuid.uuid4().hex}"
    copy = CopyFilesInput(
        source_thread_id=parent, target_thread_id=child, paths=["/gone.pdf"], copy_id="c"
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await run_copy(temporal_client, worker.task_queue, copy)
    activity_error = caught.value.cause
    assert isinstance(activity_error, ActivityError)
    assert activity_error.retry_state == RetryState.NON_RETRYABLE_FAILURE
    cause = activity_error.cause
    assert isinstance(cause, ApplicationError) and cause.type == "FileNotFound"
    assert parent in cause.message and "/gone.pdf" in cause.message
