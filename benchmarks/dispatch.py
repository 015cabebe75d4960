"""Dispatch benchmark: how many trials per second the full stack sustains, and what it adds.

One run, one machine, side by side on the same private PostgreSQL:

* **raw Optuna**: ``ask`` + suggest + ``tell`` in a loop on an RDB study, same sampler — the
  floor any Optuna-based service pays per trial (``--sampler auto``: the default search's own
  ask + tell in memory, told the recording's values);
* **service, 1 in flight**: a job through ``tuner submit`` → scheduler → Redis → Celery
  worker → database → tell, on a zero-cost backend (``replay:`` of a recorded space), one trial
  at a time: the per-trial orchestration overhead;
* **service, P in flight**: the same with ``--parallel P`` and N workers: sustained
  throughput.

Throughput counts until the job is finished (every trial measured, told to the sampler and
recorded in its Optuna study). Per trial, *overhead* = (told − queued) − (time the worker spent
measuring), from the timestamps the service stores: with one in flight it is the service's
round trip; with P in flight it also holds the wait behind the other P − 1. Prints a table and
writes JSON (``--out``).

    python benchmarks/dispatch.py --trials 1000 --workers 2 --parallel 8
    python benchmarks/dispatch.py --trials 200 --sampler auto
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.testing.services import PostgresServer  # noqa: E402
from tuner.testing.services import RedisServer  # noqa: E402

#: Every grid point of this recording is valid, so no proposal is free: the benchmark times
#: orchestration only (4,092 configs; the 1,000 trials never exhaust it).
RECORDING = ROOT / "benchmarks" / "data" / "replay" / "pnpoly_RTX_3090.json.gz"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def raw_default_search(trials: int) -> dict[str, Any]:
    """The default search (``auto``) alone: ask + tell in memory, told the recording's own
    fractions (its model then does the work it does in a job), nothing else."""
    from search_spaces import Context
    from search_spaces.recorded import load_recording
    from search_spaces.recorded import recorded_space
    from tuner.control.searches import make_proposer

    rec = load_recording(RECORDING)
    proposer = make_proposer("auto", recorded_space(rec), Context(rec.problem(), "fp32"), 0)
    best = rec.best_time_ms()
    per_trial = []
    start = time.perf_counter()
    for _ in range(trials):
        t0 = time.perf_counter()
        asked = proposer.ask()
        if asked is None:
            break
        t = rec.entries[rec.key_of(asked.config)]["time"]
        proposer.tell(asked.number, best / t if isinstance(t, int | float) else None)
        per_trial.append((time.perf_counter() - t0) * 1e3)
    wall = time.perf_counter() - start
    return {"trials": len(per_trial), "wall_s": wall, "trials_per_s": len(per_trial) / wall,
            "per_trial_ms_median": statistics.median(per_trial),
            "per_trial_ms_p95": pct(per_trial, 0.95)}


def raw_optuna(url: str, trials: int, sampler: str) -> dict[str, Any]:
    """ask + suggest (the recorded space's parameters) + tell, nothing else; for ``auto``, the
    default search's own ask + tell (``raw_default_search``)."""
    from search_spaces.recorded import load_recording
    from search_spaces.recorded import recorded_space

    if sampler == "auto":
        return raw_default_search(trials)
    space = recorded_space(load_recording(RECORDING))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url)
    chosen = optuna.samplers.RandomSampler(seed=0) if sampler == "random" else \
        optuna.samplers.TPESampler(seed=0)
    study = optuna.create_study(storage=storage, study_name="raw", direction="maximize",
                                sampler=chosen)
    per_trial = []
    start = time.perf_counter()
    for _ in range(trials):
        t0 = time.perf_counter()
        trial = study.ask()
        space.suggest(trial)
        study.tell(trial, 1.0)
        per_trial.append((time.perf_counter() - t0) * 1e3)
    wall = time.perf_counter() - start
    return {"trials": trials, "wall_s": wall, "trials_per_s": trials / wall,
            "per_trial_ms_median": statistics.median(per_trial),
            "per_trial_ms_p95": pct(per_trial, 0.95)}


class Stack:
    def __init__(self, db_url: str, redis_url: str, workdir: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
        self.env.pop("TRITON_INTERPRET", None)
        self.env.update(TUNER_DB_URL=db_url, TUNER_BROKER_URL=redis_url,
                        TUNER_CACHE_DIR=str(workdir / "cache"), PYTHONUNBUFFERED="1")
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.engine = sa.create_engine(db_url)

    def spawn(self, label: str, *args: str) -> None:
        log = open(self.workdir / f"{label}.log", "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", *args], env=self.env, cwd=ROOT, stdout=log,
            stderr=subprocess.STDOUT))

    def cli(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "tuner.cli", *args], env=self.env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
        return out.stdout

    def job_rows(self, job_id: int) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.text(
                "SELECT queued_at, started_at, finished_at, told_at FROM tuner_trials WHERE "
                "job_id = :j AND duplicate_of IS NULL AND status NOT IN ('invalid', "
                "'cancelled')"), {"j": job_id}).all())

    def run_job(self, trials: int, parallel: int, sampler: str) -> dict[str, Any]:
        out = self.cli("submit", "replay", "--backend", f"replay:{RECORDING}", "--trials",
                       str(trials), "--parallel", str(parallel), "--sampler", sampler,
                       "--seed", "0")
        job_id = int(out.split()[1].rstrip(":"))
        start = time.monotonic()
        while True:
            with self.engine.connect() as conn:
                status = conn.execute(sa.text("SELECT status FROM tuner_jobs WHERE id = :j"),
                                      {"j": job_id}).scalar()
            if status in ("completed", "failed", "cancelled"):
                break
            if time.monotonic() - start > 3600:
                raise TimeoutError("job did not finish in an hour")
            time.sleep(0.5)
        rows = self.job_rows(job_id)
        with self.engine.connect() as conn:
            finished = conn.execute(sa.text("SELECT finished_at FROM tuner_jobs WHERE id = :j"),
                                    {"j": job_id}).scalar()
        first = min(r.queued_at for r in rows)
        # Until the job is finished: every trial measured, told and recorded in its Optuna study.
        wall = (finished - first).total_seconds()
        told_wall = (max(r.told_at for r in rows) - first).total_seconds()
        overhead = [((r.told_at - r.queued_at) - (r.finished_at - r.started_at)).total_seconds()
                    * 1e3 for r in rows]
        measure = [(r.finished_at - r.started_at).total_seconds() * 1e3 for r in rows]
        return {"job": job_id, "status": status, "trials": len(rows), "parallel": parallel,
                "wall_s": wall, "trials_per_s": len(rows) / wall, "told_wall_s": told_wall,
                "overhead_ms_median": statistics.median(overhead),
                "overhead_ms_p95": pct(overhead, 0.95),
                "worker_measure_ms_median": statistics.median(measure)}

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        self.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--sampler", default="random", choices=["random", "tpe", "auto"],
                        help="the search proposing the job's configs; auto = the service's "
                        "default search (its cost grows with the trials: use --trials 200)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "dispatch.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="dispatch-"))
    pg, redis = PostgresServer(), RedisServer()
    stack = None
    try:
        raw = raw_optuna(pg.create_database("raw"), args.trials, args.sampler)
        stack = Stack(pg.create_database("service"), redis.url, workdir)
        for i in range(args.workers):
            stack.spawn(f"worker{i}", "worker", "--device", "cpu", "--name", f"w{i}@bench")
        stack.spawn("scheduler", "scheduler", "--poll", "0.1")
        time.sleep(8)  # workers probe their device and connect
        serial = stack.run_job(args.trials, 1, args.sampler)
        parallel = stack.run_job(args.trials, args.parallel, args.sampler)
    finally:
        if stack is not None:
            stack.close()
        redis.close()
        pg.close()

    rows = [
        ("raw default search ask+tell" if args.sampler == "auto" else "raw Optuna ask+tell",
         raw["trials_per_s"], raw["per_trial_ms_median"],
         raw["per_trial_ms_p95"]),
        ("service, 1 in flight", serial["trials_per_s"], serial["overhead_ms_median"],
         serial["overhead_ms_p95"]),
        (f"service, {args.parallel} in flight, {args.workers} workers",
         parallel["trials_per_s"], parallel["overhead_ms_median"], parallel["overhead_ms_p95"]),
    ]
    print(f"\n{args.trials} trials, sampler {args.sampler}, replay backend, PostgreSQL + Redis "
          f"on {os.cpu_count()} cores\n")
    print(f"{'':42} {'trials/s':>9} {'median ms':>10} {'p95 ms':>8}")
    for name, rate, med, p95 in rows:
        print(f"{name:42} {rate:9.1f} {med:10.1f} {p95:8.1f}")
    print("\nms per trial: raw Optuna = ask+tell; service = (told - queued) - measuring time.")
    base = raw["trials_per_s"]
    print(f"service / raw ask+tell throughput: serial {serial['trials_per_s'] / base:.2f}x, "
          f"parallel {parallel['trials_per_s'] / base:.2f}x")
    out = args.out.resolve()  # named relative to the repository: no local folder in results
    shown = str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else args.out.name
    result = {"args": vars(args) | {"out": shown}, "host": platform.node(),
              "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
              "raw_optuna": raw, "service_serial": serial, "service_parallel": parallel}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
