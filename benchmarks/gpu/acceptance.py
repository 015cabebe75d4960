"""GPU acceptance run: tune the library's kernels through the service on one GPU and compare
them, in the same run, with torch, Triton's default configs and torch.compile(max-autotune).

    python benchmarks/gpu/acceptance.py OUT_DIR            # on a CUDA GPU, ≈ 8 minutes
    python benchmarks/gpu/acceptance.py OUT_DIR --tiny     # interpreter sizes, any machine

Steps: calibrate the device's ceilings (device-to-device copy bandwidth, a large matmul per
dtype: ``tuner.measure.calibrate``); for each case (``acceptance_cases.py``) tune it with a fixed
trial budget through the embedded service (``tuner.tune``: isolated bench process, the
default search, results in a SQLite file under OUT_DIR), check the tuned config's output
against the reference, record the tuning job's device time (GPU-seconds, device-busy
fraction: the worker compiles ahead in a pool, ``tuner/measure/pipeline.py``), then time the tuned
kernel and every baseline interleaved
(round-robin, L2 flushed on a GPU) and score each against the roofline (the datasheet on a
known GPU, the measured ceilings otherwise). Prints one table and the targets, and writes
``acceptance.json`` into OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():  # the interpreter runs the same kernels on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from acceptance_cases import Case  # noqa: E402
from acceptance_cases import default_configs  # noqa: E402
from acceptance_cases import full_cases  # noqa: E402
from acceptance_cases import tiny_cases  # noqa: E402
from acceptance_cases import torch_impl  # noqa: E402

from search_spaces import Context  # noqa: E402
from tuner.core.devices.datasheets import device_spec  # noqa: E402
from tuner.core.devices.datasheets import target_limits  # noqa: E402
from tuner.core.roofline import Ceilings  # noqa: E402
from tuner.core.roofline import roof  # noqa: E402
from tuner.core.types import TimingSettings  # noqa: E402
from tuner.kernels import load_kernel  # noqa: E402
from tuner.measure.bench import relative_error  # noqa: E402


def _device(cache: Path) -> Any:
    from tuner.measure.devices.hardware import CpuDevice
    from tuner.measure.devices.hardware import CudaDevice

    return CudaDevice(cache) if torch.cuda.is_available() else CpuDevice(cache)


def _score(ms: float, flops: float, nbytes: float, compute: str, kind: str,
           ceilings: dict[str, Any]) -> dict[str, float]:
    spec = device_spec(kind)
    basis = Ceilings(tflops=spec.tflops, bandwidth_gbps=spec.bandwidth_gbps) if spec \
        else Ceilings.from_json(ceilings)
    peak = basis.host_peak(compute) if kind == "cpu" else basis.peak(compute)
    r = roof(flops, nbytes, peak, basis.bandwidth_gbps)
    return {"median_ms": ms, "fraction": r.roof_ms / ms, "tflops": flops / ms / 1e9,
            "gbps": nbytes / ms / 1e6, "bound": r.bound}  # type: ignore[dict-item]


def _compiled(fn: Any, deadline: float) -> tuple[Any | None, str | None]:
    if not torch.cuda.is_available():
        return None, "skipped: max-autotune tunes GPU kernels (no GPU here)"
    if time.monotonic() > deadline:
        return None, "skipped: out of time"
    try:
        return torch.compile(fn, mode="max-autotune"), None
    except Exception as exc:  # reported, not fatal
        return None, f"failed: {type(exc).__name__}: {exc}"[:200]


def run_case(case: Case, device: Any, out: Path, deadline: float,
             timing: TimingSettings) -> dict[str, Any]:
    from tuner.api import tune

    kernel = load_kernel(case.kernel)
    backend = "cuda" if torch.cuda.is_available() else "interpret"
    started = time.monotonic()
    result = tune(case.kernel, case.shape, dtype=case.dtype, trials=case.trials,
                  backend=backend, seed=0, confirm_top=0, db=f"sqlite:///{out / 'tuner.db'}",
                  compile_procs=case.compile_procs if backend == "cuda" else None)
    best = result.best[0]
    record: dict[str, Any] = {"case": case.name, "kernel": case.kernel, "problem": case.problem,
                              "dtype": case.dtype, "trials": case.trials, "job": result.job_id,
                              "compile_procs": case.compile_procs,
                              "tune_s": time.monotonic() - started, "tuned_config": best["config"],
                              "tuned_fraction": best["fraction"],
                              "device_time": device_time(result.db_url, result.job_id),
                              "impls": {}}
    if best["config"] is None:
        record["error"] = "no config succeeded"
        return record
    if not case.baselines:
        return record
    tensors = kernel.make_inputs(case.problem, case.dtype, 0, device.torch_device)
    kernel.launch(tensors, case.problem, best["config"])
    device.sync()
    error = relative_error(tensors[kernel.output], kernel.reference(tensors, case.problem))
    record["max_rel_error"] = error
    if error > kernel.tolerance[case.dtype]:
        record["error"] = f"tuned config is wrong: error {error:.2e}"
        return record
    ctx = Context(case.problem, case.dtype, target_limits(device.kind))
    defaults = default_configs(case, ctx, kernel.space)
    if len(defaults) > 1:  # what @triton.autotune over the list would pick
        quick = TimingSettings(warmup_ms=1, rep_ms=5, min_reps=2, max_reps=20,
                               flush_l2=timing.flush_l2)
        times = [statistics.median(device.time(
            lambda c=c: kernel.launch(tensors, case.problem, c), quick)) for c in defaults]
        defaults = [defaults[times.index(min(times))]]
    impls: dict[str, Any] = {
        "tuned": lambda: kernel.launch(tensors, case.problem, best["config"]),
        "triton-default": lambda: kernel.launch(tensors, case.problem, defaults[0]),
    }
    ref = torch_impl(case)
    impls["torch"] = lambda: ref(tensors)
    compiled, why = _compiled(ref, deadline) if case.max_autotune else (
        None, "not run for this case (its autotuning costs about a minute)")
    if compiled is not None:
        try:
            compiled(tensors)  # compile and autotune now, outside the timing
            device.sync()
            impls["torch.compile"] = lambda: compiled(tensors)
        except Exception as exc:
            why = f"failed: {type(exc).__name__}: {exc}"[:200]
    samples = device.time_interleaved(list(impls.values()), timing)
    flops = kernel.flops(case.problem, case.dtype)
    nbytes = kernel.min_bytes(case.problem, case.dtype)
    compute = kernel.compute_dtype(case.dtype)
    for name, s in zip(impls, samples, strict=True):
        record["impls"][name] = _score(statistics.median(s), flops, nbytes, compute,
                                       device.kind, device.ceilings())
    if why:
        record["impls"]["torch.compile"] = {"skipped": why}
    record["triton_default_config"] = defaults[0]
    tuned_ms = record["impls"]["tuned"]["median_ms"]
    record["speedup"] = {n: v["median_ms"] / tuned_ms for n, v in record["impls"].items()
                         if "median_ms" in v and n != "tuned"}
    return record


def device_time(db_url: str, job_id: int) -> dict[str, Any] | None:
    """The tuning job's device time: GPU-seconds, busy fraction, compiles and cache hits,
    median seconds per phase (``tuner.core.device_time``; ``tuner status JOB`` prints it)."""
    from tuner.core.settings import Settings
    from tuner.views.jobs import job_summary

    summary = job_summary(Settings.from_env().with_db(db_url), job_id)
    if not summary.device_time:
        return None
    found = summary.device_time.to_json()
    measured = sum(w["trials"] for w in found["workers"])
    found["configs_per_device_hour"] = measured / found["gpu_seconds"] * 3600 \
        if found["gpu_seconds"] else None
    return found


def targets(records: list[dict[str, Any]], copy_gbps: float) -> dict[str, Any]:
    """The issue's targets, computed from this run only."""
    mm = [r for r in records if r["kernel"] == "matmul" and "speedup" in r]
    big = next((r for r in mm if r["problem"].get("M") == max(m["problem"]["M"] for m in mm)),
               None) if mm else None
    rows = [r for r in records if r["kernel"] in ("rmsnorm", "softmax") and "impls" in r
            and "tuned" in r["impls"]]
    ratios = [r["speedup"]["triton-default"] for r in mm if "triton-default" in r["speedup"]]
    busy = {r["case"]: r["device_time"]["busy_fraction"] for r in records
            if r.get("device_time") and r["device_time"].get("busy_fraction") is not None}
    pipelined = {k: v for k, v in busy.items() if not k.endswith(" serial")}
    rate = {r["case"]: r["device_time"].get("configs_per_device_hour") for r in records
            if r.get("device_time")}
    serial = {k.removesuffix(" serial"): {
        "busy_serial": v, "busy_pipelined": busy.get(k.removesuffix(" serial")),
        "configs_per_device_hour_serial": rate.get(k),
        "configs_per_device_hour_pipelined": rate.get(k.removesuffix(" serial"))}
        for k, v in busy.items() if k.endswith(" serial")}
    return {
        "device_busy_fraction": busy,
        "device_busy_fraction_min_pipelined": min(pipelined.values()) if pipelined else None,
        "serial_vs_pipelined": serial,
        "largest_matmul_vs_torch": big["speedup"].get("torch") if big else None,
        "rows_fraction_of_copy_bandwidth": {r["case"]: r["impls"]["tuned"]["gbps"] / copy_gbps
                                            for r in rows},
        "matmul_geomean_vs_triton_default": math.exp(sum(map(math.log, ratios)) / len(ratios))
        if ratios else None,
    }


def print_table(records: list[dict[str, Any]]) -> None:
    print(f"\n{'case':28} {'impl':15} {'ms':>10} {'fraction':>9} {'TFLOP/s':>9} {'GB/s':>9} "
          f"{'tuned ×':>8}")
    for r in records:
        for name, v in r.get("impls", {}).items():
            if "median_ms" not in v:
                print(f"{r['case']:28} {name:15} {v.get('skipped', '')}")
                continue
            ratio = r["speedup"].get(name)
            print(f"{r['case']:28} {name:15} {v['median_ms']:10.4g} {v['fraction']:9.3f} "
                  f"{v['tflops']:9.3g} {v['gbps']:9.4g} "
                  f"{'' if ratio is None else f'{ratio:8.2f}'}")
        if "error" in r:
            print(f"{r['case']:28} error: {r['error']}")
        dt = r.get("device_time") or {}
        if dt.get("busy_fraction") is not None:
            print(f"{r['case']:28} tuning: {dt['gpu_seconds']:.1f} device-s held, busy "
                  f"{dt['busy_fraction']:.1%}, compiles {dt['compile_s']:.1f} s "
                  f"(cache hits {dt['cache_hits']}/{dt['cache_known']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for acceptance.json and the database")
    parser.add_argument("--tiny", action="store_true", help="interpreter-sized cases")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="start no case after this many seconds, and torch.compile "
                             "only in the first 60%% of them")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    device = _device(args.out / "cache")
    ceilings = device.ceilings()
    timing = TimingSettings(warmup_ms=1 if args.tiny else 25, rep_ms=5 if args.tiny else 100,
                            min_reps=3, max_reps=50 if args.tiny else 1000)
    cases = tiny_cases() if args.tiny else full_cases()
    records: list[dict[str, Any]] = []
    skipped: list[str] = []

    def write() -> dict[str, Any]:  # after every case: a run cut short keeps what it measured
        report = {"date": time.strftime("%Y-%m-%d"), "device": device.describe(),
                  "device_kind": device.kind, "ceilings": ceilings, "tiny": args.tiny,
                  "wall_s": time.monotonic() - start, "cases": records,
                  "skipped_out_of_time": skipped,
                  "targets": targets(records, float(ceilings["bandwidth_gbps"]))}
        (args.out / "acceptance.json").write_text(json.dumps(report, indent=1, default=str)
                                                  + "\n")
        return report

    for case in cases:
        elapsed = time.monotonic() - start
        if elapsed > args.budget_s:
            skipped.append(case.name)
            continue
        print(f"[{elapsed:6.1f} s] {case.name}: tuning {case.trials} trials", flush=True)
        try:
            records.append(run_case(case, device, args.out, start + args.budget_s * 0.6,
                                    timing))
        except Exception as exc:  # one broken case must not lose the others
            records.append({"case": case.name, "kernel": case.kernel, "problem": case.problem,
                            "error": f"{type(exc).__name__}: {exc}"[:2000]})
        write()
    report = write()
    print_table(records)
    print("\ntargets:", json.dumps(report["targets"], indent=1))
    if skipped:
        print("skipped (out of time):", ", ".join(skipped))
    print(f"wrote {args.out / 'acceptance.json'} ({report['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
