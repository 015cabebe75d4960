"""A fresh production process launching through ``tuner.autotune`` with a tuned config.

    python benchmarks/gpu/autotune_launch.py best.json OUT.json [--shape n_rows=16384,n_cols=4096]

``best.json`` is ``tuner export`` after ``tuner tune examples/byo_softmax.py:softmax``. The
example's kernel is wrapped in ``tuner.autotune`` (its own configs as the fallback), launched
once, and checked: the answer ``best_config`` gives (tier, config), the config the launch used,
the launch options of every binary Triton compiled in this process (the tuned ``num_warps`` and
``num_stages`` must be the only ones: a served config benchmarks nothing), the output against
torch, and then the median time of the tuned launch against Triton's own ``@triton.autotune``
choice among the example's configs, interleaved in the same process (CUDA events, L2 flushed;
on the interpreter, wall-clock). Writes everything to OUT.json; exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import byo_softmax as example  # noqa: E402

import tuner  # noqa: E402
from tuner.core.types import TimingSettings  # noqa: E402


def compiled_launch_options(jit: Any) -> list[dict[str, Any]]:
    """``num_warps``/``num_stages`` of every binary in a JIT function's in-memory cache."""
    found = []
    for caches in getattr(jit, "device_caches", {}).values():
        for kernel in caches[0].values():
            meta = getattr(kernel, "metadata", None)
            found.append({"num_warps": getattr(meta, "num_warps", None),
                          "num_stages": getattr(meta, "num_stages", None)})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="an exported best-config file (tuner export)")
    parser.add_argument("out", type=Path, help="JSON report")
    parser.add_argument("--shape", default="n_rows=16384,n_cols=4096")
    parser.add_argument("--dtype", default="fp16")
    args = parser.parse_args()
    problem = {k: int(v) for k, v in (p.split("=") for p in args.shape.split(","))}
    n_rows, n_cols = problem["n_rows"], problem["n_cols"]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    device = "cuda" if torch.cuda.is_available() else "cpu"

    found = tuner.best_config("softmax_kernel", problem, args.dtype, source=args.source)
    tuned = tuner.autotune(configs=example.softmax_kernel.configs, key=["n_rows", "n_cols"],
                           source=args.source)(example.softmax_kernel.fn)
    x = torch.randn(n_rows, n_cols, dtype=dtype, device=device)
    y = torch.full_like(x, float("nan"))
    tuned[(n_rows,)](x, y, n_rows, n_cols)
    if device == "cuda":
        torch.cuda.synchronize()
    ref = torch.softmax(x.float(), dim=-1)
    error = float((y.float() - ref).norm() / ref.norm())
    served = tuned.tuned_config(x, y, n_rows, n_cols)
    binaries = compiled_launch_options(example.softmax_kernel.fn)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (interpreter)",
        "problem": problem, "dtype": args.dtype,
        "best_config": None if found is None else {"tier": found.tier, "config": dict(found)},
        "served": None if served is None else {"kwargs": served.kwargs,
                                               "num_warps": served.num_warps,
                                               "num_stages": served.num_stages},
        "binaries_compiled": binaries, "max_rel_error": error,
    }
    checks = {
        "tuned config found (exact tier)": found is not None and found.tier == "exact",
        "launch used the tuned config": served is not None and found is not None
        and all(served.kwargs.get(k) == v for k, v in found.items()
                if k not in ("num_warps", "num_stages"))
        and served.num_warps == found.get("num_warps"),
        "output matches torch (rel. error < 2e-3)": error < 2e-3,
    }
    if device == "cuda" and served is not None:
        checks["only the tuned launch options were compiled"] = binaries == [
            {"num_warps": served.num_warps, "num_stages": served.num_stages}]
        from tuner.core.settings import Settings
        from tuner.measure.devices.hardware import CudaDevice

        cuda = CudaDevice(Settings.from_env().cache_dir)  # the calibration cached before
        timing = TimingSettings(warmup_ms=25, rep_ms=100)
        triton_y = torch.empty_like(x)
        samples = cuda.time_interleaved(
            [lambda: tuned[(n_rows,)](x, y, n_rows, n_cols),
             lambda: example.softmax_kernel[(n_rows,)](x, triton_y, n_rows, n_cols)], timing)
        tuned_ms, triton_ms = (statistics.median(s) for s in samples)
        report["timing"] = {"tuned_ms": tuned_ms, "triton_autotune_ms": triton_ms,
                            "triton_autotune_choice": str(example.softmax_kernel.best_config),
                            "speedup_vs_triton_autotune": triton_ms / tuned_ms}
    report["checks"] = checks
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps(report, indent=1, default=str))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
