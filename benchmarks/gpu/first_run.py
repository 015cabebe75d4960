"""The prepared GPU run: every check that needs a GPU, in order, each with its own time cap.

    python3 benchmarks/gpu/first_run.py OUT_DIR                # on the GPU machine (≈ 7 min)
    python3 benchmarks/gpu/first_run.py OUT_DIR --tiny         # rehearsal: interpreter sizes

Stages: the machine (nvidia-smi, versions); ``pytest tests/gpu``; the conformance kit's
``cuda`` checks; the acceptance script (``acceptance.py``: roofline fractions, ratios to cuBLAS,
Triton's default configs and max-autotune, device-busy serial vs pipelined); a short ``tuner
tune`` of a bring-your-own kernel from ``examples/`` and of a public library's kernel
(Liger-Kernel's RMSNorm, ``liger_rmsnorm.py``; needs ``fetch_liger.sh`` first), the export,
and a fresh process launching through ``tuner.autotune`` with the tuned config
(``autotune_launch.py``). Wheels the GPU machine lacks are installed from ``.whl``
(``fetch_wheels.sh``) into ``/tmp/site``.

Each stage runs as its own process group, killed at its cap (or at the run's deadline,
``--deadline-s``); its output goes to ``run.log`` (and the console), and after every stage
``summary.json`` (stage, exit status, seconds, timed out) and ``results.tar.gz`` (every log,
JSON and database of the run) are rewritten in OUT_DIR, so a run cut short keeps what it did.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SITE = Path("/tmp/site")
PY = sys.executable


def stages(work: Path, tiny: bool) -> list[tuple[str, list[str], float]]:
    """(name, command, cap in seconds), in the order they run."""
    backend = "interpret" if tiny else "cuda"
    tune = [PY, "-m", "tuner.cli", "tune"]
    byo_shape = "n_rows=64,n_cols=1000" if tiny else "n_rows=16384,n_cols=4096"
    machine = ("nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,"
               "clocks.sm,clocks.max.sm,power.limit --format=csv; nproc; free -g; "
               f"{PY} -c 'import sys, torch, triton; print(sys.version); "
               "print(\"torch\", torch.__version__, torch.version.cuda, "
               "torch.cuda.is_available()); print(\"triton\", triton.__version__)'; "
               f"{PY} -m pip list 2>/dev/null | grep -i -E "
               "'^(optuna|sqlalchemy|alembic|numpy|nvidia-ml-py|matplotlib) '")
    return [
        ("machine", ["bash", "-c", machine], 30),
        ("pytest_gpu", [PY, "-m", "pytest", "tests/gpu", "-q", "-rA", "-p", "no:cacheprovider",
                        f"--junitxml={work / 'pytest_gpu.xml'}"], 150),
        ("conformance_cuda", [PY, "-m", "pytest", "tests/process/test_backend_conformance.py",
                              "-q", "-rA", "-p", "no:cacheprovider", "-k", "cuda and not fake",
                              f"--junitxml={work / 'conformance_cuda.xml'}"], 60),
        ("acceptance", [PY, "benchmarks/gpu/acceptance.py", str(work / "acceptance"),
                        *(["--tiny"] if tiny else ["--budget-s", "170"])], 230),
        ("byo_tune", [*tune, "examples/byo_softmax.py:softmax", "--shape", byo_shape,
                      "--dtype", "fp16", "--backend", backend, "--trials", "4" if tiny else "12",
                      "--seed", "0"], 60),
        ("library_tune", [*tune, "benchmarks/gpu/liger_rmsnorm.py:rms_norm", "--shape",
                          "n_cols=4096", "--dtype", "bf16", "--backend",
                          "standin:h200" if tiny else "cuda", "--trials", "4" if tiny else "12",
                          "--seed", "0"], 60),
        ("export", [PY, "-m", "tuner.cli", "export", "--out", str(work / "best.json")], 20),
        ("autotune_launch", [PY, "benchmarks/gpu/autotune_launch.py", str(work / "best.json"),
                             str(work / "autotune.json"), "--shape", byo_shape], 45),
    ]


def install_wheels(log: Any) -> dict[str, str]:
    """The environment every stage runs in: carried wheels first on the path, the repository
    importable, private data and cache folders."""
    env = dict(os.environ)
    paths = [str(ROOT)]
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if wheels:
        proc = subprocess.run([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                               "--no-compile", "--no-cache-dir", "--upgrade", "--target",
                               str(SITE), *map(str, wheels)], capture_output=True, text=True)
        log(f"installed {len(wheels)} wheels into {SITE}: exit {proc.returncode}\n"
            f"{proc.stdout}{proc.stderr}")
        paths.insert(0, str(SITE))
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TRITON_INTERPRET", None)
    return env


def run_stage(cmd: list[str], env: dict[str, str], cap: float, log: Any) -> tuple[int, bool]:
    """Run ``cmd`` in its own process group; kill the group at ``cap`` seconds."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)
    assert proc.stdout is not None
    stream = proc.stdout
    reader = threading.Thread(target=lambda: [log(line, end="") for line in stream],
                              daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=cap)
        timed_out = False
    except subprocess.TimeoutExpired:
        log(f"\n*** cap of {cap:.0f} s reached: killing the stage\n")
        os.killpg(proc.pid, signal.SIGKILL)
        rc, timed_out = proc.wait(), True
    reader.join(timeout=5)
    return rc, timed_out


def pack(work: Path, out: Path) -> None:
    """Everything small of the run (no Triton cache) into results.tar.gz."""
    with tarfile.open(out / "results.tar.gz", "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and "cache" not in path.relative_to(work).parts \
                    and path.stat().st_size < 50 * 2**20:
                tar.add(path, arcname=str(path.relative_to(work)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tiny", action="store_true", help="rehearsal on the interpreter")
    parser.add_argument("--deadline-s", type=float, default=470.0,
                        help="no stage runs past this many seconds from the start")
    parser.add_argument("--only", nargs="*", help="run only these stages")
    args = parser.parse_args()
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/gpu_first_run")
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    logfile = (args.out / "run.log").open("w")

    def log(text: str, end: str = "\n") -> None:
        sys.stdout.write(text + end)
        sys.stdout.flush()
        logfile.write(text + end)
        logfile.flush()

    env = install_wheels(log)
    env.update(TUNER_DATA_DIR=str(work / "data"), TUNER_CACHE_DIR=str(work / "cache"),
               TUNER_KERNEL_ROOTS=str(ROOT), TUNER_ARTIFACT_DIR=str(work / "artifacts"))
    summary: list[dict[str, Any]] = []
    for name, cmd, cap in stages(work, args.tiny):
        if args.only and name not in args.only:
            continue
        left = args.deadline_s - (time.monotonic() - start)
        if left < 10:
            summary.append({"stage": name, "skipped": "out of time"})
            continue
        began = time.monotonic()
        log(f"\n=== [{began - start:6.1f} s] {name} (cap {min(cap, left):.0f} s): "
            f"{' '.join(cmd)[:300]}")
        rc, timed_out = run_stage(cmd, env, min(cap, left), log)
        seconds = time.monotonic() - began
        log(f"=== {name}: exit {rc}{' (timed out)' if timed_out else ''} in {seconds:.1f} s")
        summary.append({"stage": name, "rc": rc, "seconds": round(seconds, 1),
                        "timed_out": timed_out})
        (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        shutil.copy(work / "summary.json", args.out / "summary.json")
        for produced in (work / "acceptance" / "acceptance.json", work / "autotune.json"):
            if produced.is_file():
                shutil.copy(produced, args.out / produced.name)
        pack(work, args.out)
    log(f"\nstages: {json.dumps(summary)}\ntotal {time.monotonic() - start:.0f} s")
    return 0 if all(s.get("rc") == 0 for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
