"""The token bill: what a unit of learners' work costs in tokens, as a plain client would call
DeepSeek and as the engine does, against the scripted model answering as DeepSeek does today
(thinking on unless a request turns it off, prefixes cached by its V4 rule per ``user_id``).

The workload, in sizes a learning app sends: ``AIJOB_BENCH_TOKEN_LEARNERS`` learners (default
12), each with one snapshot of about 3,500 tokens (a material of 12,000 characters, 8 knowledge
points, 30 answers) and over it the five analyses and generators (learning state, weak points,
next actions, a 5-question quiz, 5 flashcards) and a 30-question quiz, which the engine splits
into a tree of three 10-question children.

* **plain** — each job one chat call through the ``openai`` client: the provider's defaults
  (thinking on at ``high``), the v1 prompt layout (each type's instructions and schema first,
  the snapshot last, its keys as they came), no ``user_id``, no warm-up; the 30-question quiz
  one call.
* **engine** — the same jobs created through CreateJob on one scheduler and runtime processes:
  each type's reasoning (off), the v2 layout (the canonical snapshot first), ``user_id``
  pseudonyms, warm-up before fan-out, the quiz split and joined.

Figures: ``token_cost_vs_plain`` (the engine's cost over the plain client's, off-peak prices;
goal <= 0.35), ``cache_hit_share`` (the engine's input tokens served from the cache; goal >=
0.6), ``reasoning_tokens_per_job`` (the engine's, every type off: 0), ``warmup_wait_p95_ms``
(how long the jobs that waited for a warm prefix waited; goal <= 2,000), and each run's makespan.

    python -m bench.tokens          (make bench-tokens; also a phase of make bench)
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import openai
from google.protobuf import struct_pb2
from openai.types.chat import ChatCompletionMessageParam
from sqlalchemy import Table, func, select

from bench.databases import throwaway_database
from bench.llm_storm import PLATFORM_KEY, finished, runtimes
from bench.sizes import size
from devtools.harness import tokens
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.core.prices import DEFAULT_PRICES, PriceTable
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob, AiUsageLog
from shared.job_schemas import OUTPUT_SCHEMAS
from shared.job_types import spec_of
from shared.job_types.spec import render_v1
from shared.model_catalogue import DEFAULT_MODEL

LEARNERS = size("TOKEN_LEARNERS", 12, 2)
#: The learner's work over their snapshot: (job type, params).
WORK: tuple[tuple[str, dict[str, Any]], ...] = (
    ("learning_state_analysis", {}),
    ("weak_point_analysis", {}),
    ("next_action_planning", {}),
    ("quiz_generation", {"count": 5}),
    ("flashcard_generation", {"count": 5}),
    ("quiz_generation", {"count": 30}),
)
PLAIN_CALLS_AT_ONCE = 16
#: The user of the one job that shows the runtimes are up before the work starts.
READY_USER = "bench-ready"
_jobs = cast(Table, AiJob.__table__)
_usage = cast(Table, AiUsageLog.__table__)
_RATES = PriceTable.parse(DEFAULT_PRICES).price_of(DEFAULT_MODEL)


def snapshot_of(learner: int) -> dict[str, Any]:
    """A learner's snapshot: about 3,500 tokens, keys in the order an app might send them."""
    points = [
        {"id": f"kp-{learner}-{n}", "name": f"Topic {n}", "mastery": n / 10} for n in range(8)
    ]
    return {
        "answers": [
            {
                "questionId": f"q-{learner}-{n}",
                "knowledgePointId": points[n % 8]["id"],
                "correct": (n + learner) % 3 == 0,
                "response": f"My answer to question {n} about topic {n % 8}.",
            }
            for n in range(30)
        ],
        "knowledgePoints": points,
        "material": {
            "id": f"m-{learner}",
            "title": f"Cell biology, unit {learner}",
            "content": (f"Unit {learner}: mitochondria turn nutrients into ATP. " * 240)[:12_000],
        },
        "learner": {"id": f"learner-{learner}", "level": "B1", "goals": ["pass the exam"]},
    }


def _cost(prompt: int, cached: int, completion: int) -> int:
    assert _RATES is not None
    return _RATES.off_peak.cost_micros(prompt, cached, completion)


async def _plain(server: ScriptedModelServer) -> dict[str, float]:
    """Every job as one plain chat call; the totals of the answers' usage."""
    client = openai.AsyncOpenAI(api_key=PLATFORM_KEY, base_url=server.base_url, max_retries=0)
    gate = asyncio.Semaphore(PLAIN_CALLS_AT_ONCE)
    totals = {"prompt": 0, "cached": 0, "completion": 0, "reasoning": 0, "calls": 0}

    async def call(learner: int, job_type: str, params: dict[str, Any]) -> None:
        spec = spec_of(job_type)
        assert spec is not None
        messages = render_v1(spec, snapshot_of(learner), params, OUTPUT_SCHEMAS[(job_type, "v1")])
        async with gate:
            reply = await client.chat.completions.create(
                model=DEFAULT_MODEL,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                response_format={"type": "json_object"},
            )
        usage = reply.usage
        assert usage is not None
        details = usage.completion_tokens_details
        totals["prompt"] += usage.prompt_tokens
        totals["cached"] += int(getattr(usage, "prompt_cache_hit_tokens", 0) or 0)
        totals["completion"] += usage.completion_tokens
        totals["reasoning"] += int(details.reasoning_tokens or 0) if details else 0
        totals["calls"] += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(call(n, t, p) for n in range(LEARNERS) for t, p in WORK))
    finally:
        await client.close()
    return {
        **{k: float(v) for k, v in totals.items()},
        "cost": float(_cost(totals["prompt"], totals["cached"], totals["completion"])),
        "makespan_s": time.perf_counter() - started,
    }


async def _engine(server: ScriptedModelServer) -> dict[str, float]:
    """Every job through CreateJob; the totals of the usage ledger and the warm-up waits."""
    async with throwaway_database() as url:
        env = {"AIJOB_MAX_ACTIVE_JOBS_PER_USER": "1000", "AIJOB_PEAK_HOURS": ""}
        with (
            tempfile.TemporaryDirectory() as logs,
            spawn_schedulers(url, 1, env=env) as (scheduler,),
            runtimes(scheduler.address, server.base_url, Path(logs)),
        ):
            channel = tokens.channel(scheduler.address)
            engine = create_engine(url, pool_size=1)
            try:
                # The runtimes are up (one job through them) before the work starts.
                await JobClient(channel, READY_USER).create()
                await finished(engine, 1)
                started = time.perf_counter()
                for learner in range(LEARNERS):
                    client = JobClient(channel, f"learner-{learner}")
                    for job_type, params in WORK:
                        await client.create(
                            job_type, snapshot=snapshot_of(learner), params=_struct(params)
                        )
                total = await _job_count(engine)
                ended = await finished(engine, total)
                return {**await _ledger(engine), "makespan_s": ended - started}
            finally:
                await channel.close(None)
                await engine.dispose()


def _struct(params: dict[str, Any]) -> struct_pb2.Struct:
    value = struct_pb2.Struct()
    value.update(params)
    return value


async def _job_count(engine: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(_jobs))).scalar_one())


async def _ledger(engine: Any) -> dict[str, float]:
    async with engine.connect() as conn:
        prompt, cached, completion, reasoning, cost, calls = (
            await conn.execute(
                select(
                    func.sum(_usage.c.promptTokens),
                    func.sum(_usage.c.cachedPromptTokens),
                    func.sum(_usage.c.completionTokens),
                    func.sum(_usage.c.reasoningTokens),
                    func.sum(_usage.c.costMicros),
                    func.count(),
                ).where(_usage.c.userId != READY_USER)
            )
        ).one()
        rows = (
            await conn.execute(
                select(_jobs.c.userId, _jobs.c.prefixKey, _jobs.c.createdAt, _jobs.c.startedAt)
                .where(_jobs.c.prefixKey.is_not(None))
                .order_by(_jobs.c.createdAt, _jobs.c.id)
            )
        ).all()
        failed = await conn.scalar(
            select(func.count()).where(_jobs.c.lifecycleStatus != "succeeded")
        )
    return {
        "prompt": float(prompt or 0),
        "cached": float(cached or 0),
        "completion": float(completion or 0),
        "reasoning": float(reasoning or 0),
        "cost": float(cost or 0),
        "calls": float(calls),
        "failed": float(failed or 0),
        "warmup_wait_p95_ms": _followers_wait_p95_ms(rows),
    }


def _followers_wait_p95_ms(rows: list[Any]) -> float:
    """How long the jobs that waited for a warm prefix (all of a group but its first) waited
    from their create to their lease, p95."""
    seen: set[tuple[str, str]] = set()
    waits: list[float] = []
    for user, key, created, started in rows:
        if (user, key) in seen and started is not None:
            waits.append((started - created).total_seconds() * 1000)
        seen.add((user, key))
    if len(waits) < 2:
        return max(waits, default=0.0)
    return statistics.quantiles(waits, n=20)[-1]


async def _run(runner: Any) -> dict[str, float]:
    server = ScriptedModelServer()
    server.start_in_thread()
    try:
        return cast(dict[str, float], await runner(server))
    finally:
        server.shutdown()
        server.server_close()


async def main() -> dict[str, Any]:
    plain = await _run(_plain)
    ours = await _run(_engine)
    jobs = float(LEARNERS * len(WORK))
    figures = {
        "token_learners": float(LEARNERS),
        "token_plain_cost_micros": plain["cost"],
        "token_engine_cost_micros": ours["cost"],
        "token_cost_vs_plain": ours["cost"] / max(1.0, plain["cost"]),
        "token_plain_cache_hit_share": plain["cached"] / max(1.0, plain["prompt"]),
        "cache_hit_share": ours["cached"] / max(1.0, ours["prompt"]),
        "token_plain_reasoning_tokens_per_job": plain["reasoning"] / jobs,
        "reasoning_tokens_per_job": ours["reasoning"] / jobs,
        "warmup_wait_p95_ms": ours["warmup_wait_p95_ms"],
        "token_engine_failed": ours["failed"],
        "token_plain_makespan_s": plain["makespan_s"],
        "token_engine_makespan_s": ours["makespan_s"],
    }
    print(f"\ntokens: {LEARNERS} learners x {len(WORK)} jobs, plain client against the engine\n")
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    asyncio.run(main())
