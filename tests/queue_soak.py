"""One process of the queue soak test: records deliveries for many subjects in small random
batches while its workers claim and finish jobs, until the whole queue (both processes' rows) is
drained. Prints one JSON line: order violations seen (a job claimed while an earlier row of its
subject was unfinished) and whether it drained before the time limit.

    python tests/queue_soak.py DATABASE_URL PROCESS_INDEX SUBJECTS PER_SUBJECT PROCESSES SEED
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time

from sqlalchemy import func, select

from app.store import PENDING, IncomingDelivery, JobStatus, Store, deliveries

LIMIT_SECONDS = 120


async def main(url: str, index: int, subjects: int, per_subject: int, processes: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + index)
    store = Store(url)
    items = [
        IncomingDelivery(f"p{index}-s{s}-{n}", "issue_comment", "created", 1, "o/r", f"o/r#{s}", b"{}")
        for n in range(per_subject)
        for s in range(subjects)
    ]
    expected = subjects * per_subject * processes
    violations: list[str] = []

    async def record() -> None:
        position = 0
        while position < len(items):
            size = rng.randint(1, 8)
            await store.record_deliveries(items[position : position + size])
            position += size
            await asyncio.sleep(rng.random() / 500)

    async def work(name: str) -> None:
        while True:
            jobs = await store.claim(worker_id=name, limit=rng.randint(1, 3), lease_seconds=600)
            if not jobs:
                if await drained():
                    return
                await asyncio.sleep(0.002)
                continue
            async with store.backend.read() as conn:
                for job in jobs:
                    earlier = await conn.scalar(
                        select(func.count()).where(
                            deliveries.c.subject == job.subject,
                            deliveries.c.id < job.id,
                            deliveries.c.status != "done",
                        )
                    )
                    if earlier:
                        violations.append(f"{job.subject} id {job.id}: {earlier} earlier unfinished")
            await asyncio.sleep(rng.random() / 500)
            for job in jobs:
                assert await store.finish(job, worker_id=name, status=JobStatus.DONE)

    async def drained() -> bool:
        async with store.backend.read() as conn:
            total = await conn.scalar(select(func.count()).select_from(deliveries))
            pending = await conn.scalar(select(func.count()).where(deliveries.c.status.in_(PENDING)))
        return total == expected and pending == 0

    started = time.monotonic()
    try:
        await asyncio.wait_for(
            asyncio.gather(record(), *(work(f"p{index}w{k}") for k in range(4))), LIMIT_SECONDS
        )
        finished = True
    except TimeoutError:
        finished = False
    await store.close()
    print(
        json.dumps(
            {"violations": violations, "drained": finished, "seconds": round(time.monotonic() - started, 1)}
        )
    )


if __name__ == "__main__":
    url, index, subjects, per_subject, processes, seed = sys.argv[1:]
    asyncio.run(main(url, int(index), int(subjects), int(per_subject), int(processes), int(seed)))
