"""Prometheus metrics of a worker: scraped over HTTP on a real dev server, parsed, checked."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from support import add_script, agent_definitions, idle_after, start_thread, wait_until

import weft

Families = dict[str, Metric]

DEFINITIONS = Path(__file__).parent / "crash_definitions"
WEFT = str(Path(sys.executable).parent / "weft")

# A weather call whose first attempt meets a 503, an exploding tool, then an answer.
SCRIPT = {
    "replies": [
        {
            "tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}],
            "usage": {"input_tokens": 100, "output_tokens": 10},
            "error": {"status": 503, "body": "try again"},
            "times": 1,
        },
        {
            "tool_calls": [{"name": "explode", "arguments": {"text": "boom"}}],
            "usage": {"input_tokens": 200, "output_tokens": 20},
        },
        {"text": "Done.", "usage": {"input_tokens": 300, "output_tokens": 30, "cached_tokens": 50}},
    ]
}


async def scrape(http: httpx.AsyncClient, url: str) -> Families:
    """GET `url`, parse it as Prometheus text, and check each family appears once."""
    response = await http.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(response.text))
    names = [family.name for family in families]
    assert len(names) == len(set(names)), f"duplicate families: {sorted(names)}"
    return {family.name: family for family in families}


def value(families: Families, sample_name: str, **labels: str) -> float | None:
    """The value of the sample `sample_name` whose labels include `labels`, or None."""
    for family in families.values():
        for sample in family.samples:
            if sample.name == sample_name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


async def scrape_until(
    http: httpx.AsyncClient, url: str, holds: Callable[[Families], bool], timeout: float = 30.0
) -> Families:
    """Scrape until `holds` (visibility and the gauges' cache lag a little behind)."""
    deadline = asyncio.get_running_loop().time() + timeout
    families = await scrape(http, url)
    while not holds(families):
        assert asyncio.get_running_loop().time() < deadline, "metrics never matched"
        await asyncio.sleep(0.5)
        families = await scrape(http, url)
    return families


async def test_a_thread_moves_the_counters_and_gauges(
    start_worker, weft_config, temporal_client, scripted_server
):
    """A thread with a retried model call, a tool and a failing tool shows up in /metrics
    with the right counts, tokens, cost and status, beside the Temporal SDK's metrics."""
    weft_config.telemetry.metrics.port = 0
    script = add_script(scripted_server, SCRIPT)
    worker = await start_worker(agent_definitions(script))
    idle_worker = await start_worker(agent_definitions(script))
    assert worker.metrics is not None and idle_worker.metrics is not None
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Weather?"}]
    )
    await wait_until(handle, idle_after(1), timeout=60)
    assert worker.store is not None
    stored = worker.store.events.read(handle.id, limit=10_000)
    completed_costs = [e.payload["costUsd"] for e in stored if e.type == "model.completed"]

    async with httpx.AsyncClient(timeout=60) as http:
        families = await scrape_until(
            http,
            worker.metrics.url,
            lambda f: value(f, "weft_threads", status="waiting_input") == 1,
        )
        idle = await scrape(http, idle_worker.metrics.url)

    model = {"model": "scripted"}
    assert value(families, "weft_model_calls_total", status="ok", **model) == 3
    assert value(families, "weft_model_calls_total", status="error", **model) == 1
    assert value(families, "weft_steps_total", status="ok") == 3
    assert value(families, "weft_tool_calls_total", tool="weather", status="ok") == 1
    assert value(families, "weft_tool_calls_total", tool="explode", status="error") == 1
    assert value(families, "weft_model_tokens_total", kind="input", **model) == 600
    assert value(families, "weft_model_tokens_total", kind="output", **model) == 60
    assert value(families, "weft_model_tokens_total", kind="cached", **model) == 50
    cost = value(families, "weft_model_cost_usd_total", **model)
    assert cost is not None and cost > 0 and abs(cost - sum(completed_costs)) < 1e-9
    assert value(families, "weft_threads", status="running", task_queue=worker.task_queue) == 0
    assert value(families, "weft_queue_depth", agent="helper") == 0
    # The SDK's own metrics, from the runtime the worker's client was connected on.
    assert value(families, "temporal_workflow_task_execution_latency_count") is not None
    assert (
        value(families, "temporal_activity_execution_latency_count", activity_type="tool.call") == 2
    )
    assert not [name for name in families if name.endswith("_created")]
    # The other worker of the process counts in a registry of its own.
    assert value(idle, "weft_model_calls_total", status="ok", **model) is None
    assert value(idle, "weft_threads", status="waiting_input") == 0


async def test_the_endpoint_answers_keep_alive_and_refuses_other_paths(
    dev_server, scripted_server, tmp_path
):
    """weft.Worker(metrics_port=0) serves /metrics on a free port, several requests on one
    connection; another path is a 404 and a POST a 405."""
    client = await weft.connect(dev_server.address)
    providers = {"scripted": {"kind": "openai", "baseUrl": scripted_server.openai_base_url}}
    definitions = agent_definitions(add_script(scripted_server, SCRIPT))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    running = weft.Worker(
        client,
        definitions,
        store=f"sqlite:///{tmp_path / 'weft.db'}",
        providers=providers,
        task_queue=queue,
        metrics_port=0,
        root=tmp_path,
    )
    assert running.metrics_url is None
    async with running:
        url = running.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert not url.endswith(":0/metrics")
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            for _ in range(3):
                families = await scrape(http, url)
                assert (
                    value(families, "weft_threads", status="waiting_input", task_queue=queue) == 0
                )
            missing = await http.get(url.replace("/metrics", "/other"))
            refused = await http.post(url)
    assert (missing.status_code, refused.status_code) == (404, 405)
    assert running.metrics_url is None


async def test_weft_worker_serves_metrics_on_the_flag_port(dev_server, tmp_path):
    """`weft worker --metrics-port 0` prints the bound address and serves weft's and the
    SDK's metrics there."""
    config = tmp_path / "weft.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": dev_server.address, "taskQueue": f"tq-{uuid.uuid4().hex}"},
                "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
                "definitions": str(DEFINITIONS),
                "providers": {
                    "scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}
                },
            }
        )
    )
    process = await asyncio.create_subprocess_exec(
        WEFT,
        "--config",
        str(config),
        "worker",
        "--metrics-port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = await _line_after(process, "metrics at ")
        async with httpx.AsyncClient(timeout=60) as http:
            families = await scrape_until(
                http, url, lambda f: value(f, "temporal_request_total") is not None
            )
        assert "weft_model_calls" in families and "weft_threads" in families
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
    assert process.returncode == 0


async def _line_after(process: asyncio.subprocess.Process, marker: str) -> str:
    """What follows `marker` on the first output line that holds it."""
    assert process.stdout is not None
    seen: list[str] = []
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line, f"weft worker exited: {''.join(seen)}"
        seen.append(line)
        if marker in line:
            return line.split(marker, 1)[1].strip()
