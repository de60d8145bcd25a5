"""Benchmark runCode end to end: trivial TS latency, terminate-to-settle, 8-way throughput.

Run: `.venv/bin/python bench/bench_run_code.py`. Targets: trivial p50 < 15 ms, terminate
p99 <= 50 ms. Each figure includes parse, erase, link, run and marshal.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from weft.activities.sandbox import SandboxPool, run_code

TRIVIAL = "const answer: number = 40 + 2;\nexport default answer;\n"
LATENCY_RUNS = 300
TERMINATE_RUNS = 40
THROUGHPUT_CALLS = 400
CONCURRENCY = 8


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def wait_warm(pool: SandboxPool, n: int) -> None:
    # Let the pool finish starting its workers so process start-up is not measured.
    runs = [run_code(TRIVIAL, pool=pool) for _ in range(n)]
    await asyncio.gather(*runs)
    await asyncio.sleep(0.5)


async def trivial_latency(pool: SandboxPool) -> list[float]:
    samples = []
    for _ in range(LATENCY_RUNS):
        t0 = time.perf_counter()
        result = await run_code(TRIVIAL, pool=pool)
        samples.append((time.perf_counter() - t0) * 1000)
        assert result.status == "success" and result.result == 42, result
    return samples


async def terminate_latency(pool: SandboxPool) -> list[float]:
    samples = []
    for _ in range(TERMINATE_RUNS):
        handle = run_code("while (true) {}", pool=pool)
        await asyncio.sleep(0.05)  # the loop is spinning in its worker by now
        t0 = time.perf_counter()
        handle.terminate("bench")
        result = await handle
        samples.append((time.perf_counter() - t0) * 1000)
        assert result.status == "terminated"
        await asyncio.sleep(0.3)  # let the pool replace the killed worker
    return samples


async def throughput(pool: SandboxPool) -> float:
    queue = list(range(THROUGHPUT_CALLS))

    async def lane() -> None:
        while queue:
            queue.pop()
            result = await run_code(TRIVIAL, pool=pool)
            assert result.status == "success"

    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    return THROUGHPUT_CALLS / (time.perf_counter() - t0)


def line(name: str, samples: list[float]) -> str:
    return (
        f"{name:<28} p50 {pct(samples, 50):7.2f} ms   p99 {pct(samples, 99):7.2f} ms   "
        f"mean {statistics.mean(samples):7.2f} ms   (n={len(samples)})"
    )


async def main() -> None:
    with SandboxPool(size=CONCURRENCY, max_workers=CONCURRENCY) as pool:
        await wait_warm(pool, CONCURRENCY)
        print(line("trivial TS module", await trivial_latency(pool)))
        print(line("terminate -> settled", await terminate_latency(pool)))
        await wait_warm(pool, CONCURRENCY)
        print(f"{'throughput (8 concurrent)':<28} {await throughput(pool):7.1f} calls/s")


if __name__ == "__main__":
    asyncio.run(main())
