"""``make bench``: every figure of docs/performance.md in one run, one table, and
``bench/results/latest.json``.

Order (PHASES): the MariaDB ceiling and our drain (AIJOB_BENCH_JOBS, default 5000), the peer and
its PostgreSQL ceiling (same N), the protocol floor (AIJOB_BENCH_FLOOR_JOBS, default 20000), one
statement's cost, latency (AIJOB_BENCH_LATENCY_JOBS, default 1000), the scale runs
(AIJOB_BENCH_SCALE_JOBS per drain, default 1000) and the idle streams, in-flight leases, the API
at scale, the model storms, cheap hours, output streams, job trees against flat jobs
(AIJOB_BENCH_TREES trees of 10 children, default 100), the token bill (AIJOB_BENCH_TOKEN_LEARNERS,
default 12) and the Galera cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import psutil

from bench import (
    api_scale,
    cost,
    galera,
    inflight,
    lease_latency,
    llm_outage,
    llm_overload,
    llm_storm,
    outputs,
    peer,
    protocol_floor,
    scale,
    sizes,
    statement_cost,
    throughput,
    tokens,
    trees,
)

RESULTS = Path(__file__).parent / "results"

Figures = dict[str, float | str | None]


def _ratio(numerator: float | str | None, denominator: float | str | None) -> float | None:
    if isinstance(numerator, float) and isinstance(denominator, float) and denominator:
        return numerator / denominator
    return None


def _design_floor(f: Figures) -> float | None:
    """Jobs per second if every core did nothing but the drain's gRPC exchange (both sides) and
    its batched SQL (loop and database): no validation, projection, outbox or Python logic."""
    parts = [
        f.get("grpc_floor_client_us_per_job"),
        f.get("grpc_floor_server_us_per_job"),
        f.get("batched_ceiling_cpu_us_per_job"),
    ]
    if not all(isinstance(p, float) and p > 0 for p in parts):
        return None
    return (psutil.cpu_count() or 1) * 1e6 / sum(p for p in parts if isinstance(p, float))


def _row(name: str, value: float | str | None, unit: str, goal: str = "") -> str:
    shown = f"{value:10.2f}" if isinstance(value, float) else f"{value or 'n/a':>10}"
    return f"{name:52} {shown} {unit:8} {goal}"


def table(f: Figures) -> str:
    peer_value = f["peer_jobs_per_s"] if f["peer_jobs_per_s"] is not None else f["peer_skipped"]
    rows = [
        _row("MariaDB ceiling (3 commits/job, 20 connections)", f["ceiling_jobs_per_s"], "jobs/s"),
        _row("ours: CreateJob, 32 callers", f["ours_create_jobs_per_s"], "jobs/s"),
        _row(
            "MariaDB batched ceiling (50 jobs/transaction)",
            f["batched_ceiling_jobs_per_s"],
            "jobs/s",
        ),
        _row("ours: drain, reports on the stream, 4 x 32", f["ours_jobs_per_s"], "jobs/s"),
        _row("  its CPU: the scheduler", f.get("ours_drain_scheduler_cpu_us_per_job"), "us/job"),
        _row("  its CPU: MariaDB", f.get("ours_drain_mariadb_cpu_us_per_job"), "us/job"),
        _row(
            "  its CPU: the benchmark runtimes",
            f.get("ours_drain_runtimes_cpu_us_per_job"),
            "us/job",
        ),
        _row("  all cores / its CPU per job", f.get("ours_drain_cpu_bound_jobs_per_s"), "jobs/s"),
        _row("  share of the cores it kept busy", f.get("ours_drain_cores_busy"), ""),
        _row("ours: drain, unary SubmitResult, 4 x 32", f["ours_unary_jobs_per_s"], "jobs/s"),
        _row(
            "ours: drain, an output chunk per job, 4 x 32",
            f["ours_jobs_per_s_with_chunks"],
            "jobs/s",
        ),
        _row("  with chunks / without", f["chunks_drain_vs_plain"], "", "goal >= 0.90"),
        _row("PostgreSQL ceiling (same design and loop)", f["pg_ceiling_jobs_per_s"], "jobs/s"),
        _row("peer: PgQueuer drain, 4 x 32", peer_value, "jobs/s"),
        _row("ours / MariaDB ceiling", f["ours_vs_ceiling"], "", "goal >= 0.70"),
        _row("ours / batched ceiling", f["ours_vs_batched_ceiling"], ""),
        _row("ours / peer", f["ours_vs_peer"], "", "goal >= 1.00, floor 0.40"),
        _row("peer / PostgreSQL ceiling", f["peer_vs_pg_ceiling"], ""),
        _row(
            "protocol floor: the gRPC exchange alone, no DB", f["grpc_floor_jobs_per_s"], "jobs/s"
        ),
        _row("  benchmark runtimes CPU", f["grpc_floor_client_us_per_job"], "us/job"),
        _row("  instant server CPU", f["grpc_floor_server_us_per_job"], "us/job"),
        _row("protocol floor / peer", f["grpc_floor_vs_peer"], ""),
        _row(
            "  batched SQL alone: CPU (loop and MariaDB)",
            f["batched_ceiling_cpu_us_per_job"],
            "us/job",
        ),
        _row(
            "design floor: all cores / (exchange + batched SQL)",
            f["design_floor_jobs_per_s"],
            "jobs/s",
        ),
        _row("design floor / peer", f["design_floor_vs_peer"], ""),
        _row("ours / protocol floor", f["ours_vs_grpc_floor"], ""),
        _row("one statement, SQLAlchemy's path: CPU", f["statement_sqlalchemy_us"], "us"),
        _row("  the same on our driver path", f["statement_driver_us"], "us"),
        _row("  the asyncmy cursor alone", f["statement_cursor_us"], "us"),
        _row(
            "enqueue (row written) -> lease in runtime p50",
            f["lease_latency_p50_ms"],
            "ms",
            "goal <= 3",
        ),
        _row("enqueue (row written) -> lease in runtime p95", f["lease_latency_p95_ms"], "ms"),
        _row(
            "enqueue (row written) -> lease in runtime p99",
            f["lease_latency_p99_ms"],
            "ms",
            "goal <= 10",
        ),
        _row("CreateJob reply -> lease p50", f["create_reply_to_lease_p50_ms"], "ms"),
        _row("CreateJob reply -> lease p99", f["create_reply_to_lease_p99_ms"], "ms"),
        _row("CreateJob call -> lease p50", f["create_call_to_lease_p50_ms"], "ms"),
        _row("CreateJob call -> lease p99", f["create_call_to_lease_p99_ms"], "ms"),
        _row("CreateJob call -> succeeded p50", f["succeeded_latency_p50_ms"], "ms"),
        _row("CreateJob call -> succeeded p99", f["succeeded_latency_p99_ms"], "ms"),
        _row(
            "CreateJob call -> lease p50, other replica",
            f["lease_latency_other_replica_p50_ms"],
            "ms",
        ),
        _row("CreateJob round trip p50 (reference)", f["create_rpc_p50_ms"], "ms"),
    ]
    for runtimes, replicas in scale.SHAPES:
        key = f"scale_{runtimes}rt_{replicas}sched_jobs_per_s"
        rows.append(_row(f"scale: {runtimes} runtimes, {replicas} scheduler(s)", f[key], "jobs/s"))
    rows += [
        _row(f"{scale.IDLE_STREAMS} idle Poll streams: RSS", f["idle_streams_rss_mib"], "MiB"),
        _row("  per stream", f["idle_streams_rss_per_stream_kib"], "KiB"),
        _row("  CPU at rest", f["idle_streams_cpu_percent"], "% core"),
        _row("in-flight leases held on 100 streams", f["inflight_leases"], ""),
        _row("  scheduler CPU", f["inflight_scheduler_cpu_percent"], "% core", "goal <= 10"),
        _row("  database statements/s", f["inflight_db_statements_per_s"], "/s"),
        _row("  ... with a tenth of the leases", f["inflight_small_db_statements_per_s"], "/s"),
        _row("  spurious reaps", f["inflight_spurious_reaps"], "", "goal 0"),
        _row("CreateJob, 32 callers (same run)", f["ours_create_single_jobs_per_s"], "jobs/s"),
        _row("CreateJobs, 100 items a call, 4 callers", f["ours_create_bulk_jobs_per_s"], "jobs/s"),
        _row("  bulk / single", f["bulk_vs_single_create"], "", "goal >= 5"),
        _row(
            f"{api_scale.WATCHERS} idle WatchJob streams: DB statements/s",
            f["watch_idle_db_statements_per_s"],
            "/s",
            "goal <= 20",
        ),
        _row("  scheduler CPU", f["watch_idle_cpu_percent"], "% core", "goal <= 5"),
        _row("GetJob p50, no watchers", f["getjob_p50_ms_idle"], "ms"),
        _row(
            f"GetJob p50, {api_scale.CROWD} watchers open",
            f["getjob_p50_ms_with_2000_watchers"],
            "ms",
            "goal <= 2 x idle",
        ),
        _row(
            f"{api_scale.SUBSCRIBERS} idle SubscribeEvents: DB statements/s",
            f["subscribe_idle_db_statements_per_s"],
            "/s",
            "goal <= 20",
        ),
        _row("  scheduler CPU", f["subscribe_idle_cpu_percent"], "% core", "goal <= 5"),
        _row("drain with AIJOB_WORKERS=2, 4 x 32", f["workers_2_jobs_per_s"], "jobs/s"),
        _row(
            f"trees: {trees.TREES} x {trees.CHILDREN} children / {trees.TREES * trees.CHILDREN}"
            " flat jobs",
            f.get("tree_drain_vs_flat"),
            "",
            "goal >= 0.8",
        ),
        _row(
            "  last child -> parent succeeded p99",
            f.get("tree_fan_in_p99_ms"),
            "ms",
            "goal <= 50",
        ),
        _row("throttle storm: jobs (250 + 2 x 25 users, 120/min)", f["llm_jobs"], ""),
        _row("  failed", f["llm_failed"], "", "goal 0"),
        _row("  429s / model calls", f["llm_rate_limited_share"], "", "goal <= 0.05"),
        _row("  makespan / ideal", f["llm_makespan_vs_ideal"], "", "goal <= 1.25"),
        _row(
            "  small users' create -> lease p95", f["llm_small_users_wait_p95_s"], "s", "goal <= 5"
        ),
        _row("  model calls at once, at most", f["llm_model_max_concurrent"], ""),
        _row("overload storm: jobs (no limit set, model holds past 8)", f["llm_overload_jobs"], ""),
        _row("  failed", f["llm_overload_failed"], "", "goal 0"),
        _row(
            "  calls open at the model, settled mean",
            f["llm_overload_open_calls_mean"],
            "",
            "goal ~8",
        ),
        _row(
            "  first token p95 / unloaded", f["llm_overload_ttft_p95_vs_unloaded"], "", "goal <= 2"
        ),
        _row(
            "outage storm: jobs (primary 503s for 20 s, fallback provider)",
            f.get("outage_jobs"),
            "",
        ),
        _row("  failed", f.get("outage_failed"), "", "goal 0"),
        _row("  makespan / clean run's", f.get("outage_makespan_vs_clean"), "", "goal <= 1.3"),
        _row("  attempts spent on the outage", f.get("outage_attempts_spent"), "", "goal <= 5"),
        _row("  calls the outage answered", f.get("outage_primary_failed_calls"), ""),
        _row("cheap hours: jobs across a 1-minute peak window", f.get("cost_jobs"), ""),
        _row(
            "  background cost, off-peak / immediate",
            f.get("cost_off_peak_vs_immediate"),
            "",
            "goal <= 0.55",
        ),
        _row("  deadline misses", f.get("cost_deadline_misses"), "", "goal 0"),
        _row(
            "  interactive create -> lease p95, / immediate",
            f.get("cost_interactive_wait_p95_ratio"),
            "",
            "goal <= 1.2",
        ),
        _row(
            f"token bill: {tokens.LEARNERS} learners' work, engine cost / a plain client's",
            f.get("token_cost_vs_plain"),
            "",
            "goal <= 0.35",
        ),
        _row("  input tokens from the cache", f.get("cache_hit_share"), "", "goal >= 0.6"),
        _row(
            "  reasoning tokens per job (every type off)",
            f.get("reasoning_tokens_per_job"),
            "",
            "goal 0",
        ),
        _row("  warm-up wait p95", f.get("warmup_wait_p95_ms"), "ms", "goal <= 2000"),
        _row(
            f"{outputs.JOBS * outputs.CALLERS_PER_JOB} StreamOutput callers, {outputs.JOBS} jobs:"
            " DB statements/s",
            f.get("stream_output_db_statements_per_s"),
            "/s",
        ),
        _row(
            "  reads per job per wake-up",
            f.get("stream_output_reads_per_job_wakeup"),
            "",
            "goal <= 1 + 1/jobs",
        ),
        _row(
            "killed mid-generation: completion tokens / one call",
            f.get("resume_completion_tokens_ratio"),
            "",
            "goal <= 1.1",
        ),
        _row("galera: drain, 3-node cluster", f.get("galera_jobs_per_s"), "jobs/s"),
        _row("  / the same on one MariaDB", f.get("galera_vs_single"), "", "goal >= 0.8"),
        _row(
            "  writer killed: first lease through another node",
            f.get("galera_failover_s"),
            "s",
            "goal <= 10",
        ),
    ]
    return "\n".join(rows)


Phase = Callable[[], Awaitable[Mapping[str, float | str | None]]]

PHASES: dict[str, Phase] = {
    "throughput": throughput.main,
    "peer": lambda: peer.main(throughput.JOBS),
    "protocol_floor": protocol_floor.main,
    "statement_cost": statement_cost.main,
    "lease_latency": lease_latency.main,
    "scale": scale.main,
    "inflight": inflight.main,
    "api_scale": api_scale.main,
    "llm_storm": llm_storm.main,
    "llm_overload": llm_overload.main,
    "llm_outage": llm_outage.main,
    "cost": cost.main,
    "outputs": outputs.main,
    "trees": trees.main,
    "tokens": tokens.main,
    "galera": galera.main,
}
#: ``make bench-smoke`` runs the phases in these lanes at once, each lane a process of its own
#: (its figures measure nothing, so the phases may share the cores): the whole smoke takes the
#: longest lane's time. ``make bench`` runs every phase alone, one after another.
SMOKE_LANES = (
    ("galera", "llm_overload", "llm_outage"),
    ("throughput", "peer", "protocol_floor", "lease_latency", "scale", "inflight"),
    ("api_scale", "llm_storm", "cost", "outputs", "statement_cost", "trees", "tokens"),
)


async def _phases(names: Sequence[str]) -> Figures:
    figures: Figures = {}
    for name in names:
        phase_started = time.perf_counter()
        figures.update(await PHASES[name]())
        figures[f"phase_{name}_s"] = time.perf_counter() - phase_started
    return figures


async def _lanes() -> Figures:
    """Every lane of SMOKE_LANES in a process of its own (``AIJOB_BENCH_LANE``), at once."""
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"lane-{n}.json" for n in range(len(SMOKE_LANES))]
        lanes = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench",
                env={**os.environ, LANE: ",".join(names), LANE_OUT: str(out)},
            )
            for names, out in zip(SMOKE_LANES, outs, strict=True)
        ]
        codes = [await lane.wait() for lane in lanes]
        if any(codes):
            raise SystemExit(f"bench-smoke lanes exited {codes}")
        figures: Figures = {}
        for out in outs:
            figures.update(json.loads(out.read_text()))
        return figures


#: A lane's phases (comma-separated) and where it writes their figures: set for a lane's process.
LANE, LANE_OUT = "AIJOB_BENCH_LANE", "AIJOB_BENCH_LANE_OUT"


async def main() -> None:
    started = time.perf_counter()
    if os.environ.get(LANE):
        lane = await _phases(os.environ[LANE].split(","))
        await asyncio.to_thread(Path(os.environ[LANE_OUT]).write_text, json.dumps(lane))
        return
    figures: Figures = {
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
    }
    figures.update(await (_lanes() if sizes.SMOKE else _phases(list(PHASES))))
    figures["ours_vs_ceiling"] = _ratio(figures["ours_jobs_per_s"], figures["ceiling_jobs_per_s"])
    figures["ours_vs_peer"] = _ratio(figures["ours_jobs_per_s"], figures["peer_jobs_per_s"])
    figures["ours_vs_batched_ceiling"] = _ratio(
        figures["ours_jobs_per_s"], figures["batched_ceiling_jobs_per_s"]
    )
    figures["peer_vs_pg_ceiling"] = _ratio(
        figures["peer_jobs_per_s"], figures["pg_ceiling_jobs_per_s"]
    )
    figures["grpc_floor_vs_peer"] = _ratio(
        figures["grpc_floor_jobs_per_s"], figures["peer_jobs_per_s"]
    )
    figures["design_floor_jobs_per_s"] = _design_floor(figures)
    figures["design_floor_vs_peer"] = _ratio(
        figures["design_floor_jobs_per_s"], figures["peer_jobs_per_s"]
    )
    figures["ours_vs_grpc_floor"] = _ratio(
        figures["ours_jobs_per_s"], figures["grpc_floor_jobs_per_s"]
    )
    figures["bench_seconds"] = time.perf_counter() - started
    print(f"\n{'=' * 80}\nAI Job Engine benchmark, {figures['machine']}\n")
    print(table(figures))
    RESULTS.mkdir(exist_ok=True)
    # A smoke run measures nothing: it must not stand in for the figures of record.
    out = RESULTS / ("smoke.json" if sizes.SMOKE else "latest.json")
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\n{figures['bench_seconds']:.0f} s; wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
