"""Bring your own kernel with no glue (launcher + NAME_inputs + NAME_reference), and
``tuner.autotune`` as a drop-in for ``@triton.autotune`` in a fresh process.

Real `tuner` processes on the Triton interpreter; the module under test uses two outputs,
reset_to_zero, prune_configs_by and a neighbour import.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tests.conftest import run_cli
from tests.conftest import run_cli_here

MULTI = "tests/kernels/byo_multi.py:scale_and_sum"
USE_SCRIPT = r"""
import importlib.util, json, sys, warnings
import torch
import tuner
spec = importlib.util.spec_from_file_location("byo_multi", sys.argv[1])
sys.path.insert(0, sys.argv[2])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
own = mod.scale_and_sum_kernel   # swap @triton.autotune for @tuner.autotune, same arguments
mod.scale_and_sum_kernel = tuner.autotune(
    configs=own.configs, key=own.keys, record_missing=sys.argv[3],
    prune_configs_by={"early_config_prune": mod._no_big_blocks})(own.fn)
x = torch.rand(4096)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y, acc = mod.scale_and_sum(x, torch.zeros(1))
    mod.scale_and_sum(torch.rand(100), torch.zeros(1))
cfg = mod.scale_and_sum_kernel.tuned_config(x, y, acc, 4096, 2.0)
print(json.dumps({
    "ok": bool(torch.allclose(y, 2 * x)) and abs(float(acc) - float(x.sum())) < 1e-2,
    "config": None if cfg is None else [cfg.kwargs, cfg.num_warps, cfg.num_stages],
    "warnings": [str(w.message) for w in caught if "tuner" in str(w.message)],
    "heavy": [m for m in ("optuna", "celery", "sqlalchemy") if m in sys.modules],
}))
"""


SERVED_SCRIPT = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import byo_multi
x = torch.rand(4096)
print(json.dumps(byo_multi.scale_and_sum_kernel.served(x, torch.empty_like(x), torch.zeros(1),
                                                       4096, 2.0)))
"""


def _use(env: dict[str, str], missing) -> dict:
    proc = subprocess.run([sys.executable, "-c", USE_SCRIPT, str(ROOT / MULTI.split(":")[0]),
                           str(ROOT / "tests" / "kernels"), str(missing)],
                          env={**env, "TRITON_INTERPRET": "1"}, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_a_module_by_convention_tunes_serves_and_revalidates(cli_env, tmp_path):
    # A fresh process with no database: the kernel's own configs serve, one warning, and the
    # shapes are recorded as missing.
    missing = tmp_path / "missing.jsonl"
    cold = _use(cli_env, missing)
    assert cold["ok"] and cold["config"] is None
    assert "optuna" not in cold["heavy"] and "celery" not in cold["heavy"]
    assert len(cold["warnings"]) == 1 and "no database" in cold["warnings"][0]
    lines = [json.loads(line) for line in missing.read_text().splitlines()]
    assert [(r["kernel"], r["problem"], r["served"]) for r in lines] == [
        ("scale_and_sum_kernel", {"n": 4096}, "none"), ("scale_and_sum_kernel", {"n": 100},
                                                         "none")]

    # `tuner tune --missing` tunes exactly those shapes, through the convention loader.
    tuned = run_cli(["tune", "--missing", str(missing), "--backend", "interpret",
                     "--trials", "4", "--seed", "0"], cli_env, timeout=600)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}")
    with engine.connect() as conn:
        trials = conn.execute(sa.text("SELECT config, status, error FROM tuner_trials")).all()
        kernels = conn.execute(sa.text("SELECT DISTINCT kernel FROM tuner_best_configs")).scalars()
        assert list(kernels) == ["scale_and_sum_kernel"]
    pruned = [t for t in trials if '"BLOCK": 1024' in t.config]
    assert pruned and all(t.status == "invalid" and "early_config_prune" in t.error
                          for t in pruned)
    assert any(t.status == "ok" for t in trials)  # two outputs checked, reset_to_zero honoured

    # Production now launches with the tuned config: meta-parameters, warps and stages.
    warm = _use(cli_env, tmp_path / "missing2.jsonl")
    assert warm["ok"] and warm["config"] is not None and warm["warnings"] == []
    best = run_cli(["best", "--kernel", MULTI, "--shape", "n=4096", "--dtype", "fp32"],
                   cli_env)
    assert best.returncode == 0, best.stderr
    stored = json.loads(best.stdout)
    assert warm["config"] == [{"BLOCK": stored["BLOCK"]}, stored["num_warps"],
                              stored["num_stages"]]
    assert "tier exact" in best.stderr

    again = run_cli(["revalidate", "--kernel", MULTI, "--json"], cli_env, timeout=600)
    assert again.returncode in (0, 1), again.stderr
    verdicts = {r["verdict"] for r in json.loads(again.stdout)}
    assert verdicts <= {"same", "improved", "regressed"}, again.stdout


@pytest.mark.parametrize(("ref", "message"), [
    ("tests/kernels/byo_no_reference.py:double",
     "has no double_reference: add `def double_reference(same arguments as double)`"),
    ("tests/kernels/byo_no_reference.py:double_kernel",
     "double_kernel is a kernel and no function of the module launch it"),
])
def test_a_missing_partner_is_one_line_saying_what_to_add(cli_env, ref, message):
    proc = run_cli_here(["tune", ref, "--shape", "n=100"], cli_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_a_failing_count_fails_the_trial_not_the_bench(cli_env):
    proc = run_cli(["tune", "tests/kernels/byo_bad_flops.py:copy", "--shape", "n=1000",
                    "--dtype", "fp32", "--backend", "interpret", "--trials", "3"], cli_env,
                   timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "failed with crashed: ZeroDivisionError: division by zero" in out
    assert "Traceback" not in proc.stderr


def test_on_a_stand_in_it_ends_promptly_and_pruned_configs_are_invalid(cli_env):
    """A bring-your-own kernel has no analytic model: its confirmation on ``standin:`` fails,
    is recorded, and the job ends (well within the 660 s confirmation deadline it once waited
    out); a config its ``early_config_prune`` rejects is ``invalid`` as on every backend."""
    proc = run_cli(["tune", MULTI, "--shape", "n=4096", "--backend", "standin:h100-sxm",
                    "--trials", "4", "--seed", "0"], cli_env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "confirmation failed on the worker" in out, out
    assert f"tuner tune {MULTI} --shape n=4096 --dtype fp32 --backend cuda" in " ".join(
        out.split()), out  # the next step names the file kernel and the shape it ran
    engine = sa.create_engine(f"sqlite:///{cli_env['TUNER_DATA_DIR']}/tuner.db")
    with engine.connect() as conn:
        statuses = {r[0] for r in conn.execute(sa.text("SELECT status FROM tuner_trials"))}
    engine.dispose()
    assert "invalid" in statuses and "crashed" not in statuses, statuses
    listed = run_cli(["status"], cli_env, check=True).stdout
    assert "1 (simulated)" in listed, listed  # a stand-in's fraction is no measurement


def test_swapping_the_decorator_in_the_tuned_file_keeps_its_configs_fresh(cli_env, tmp_path):
    """The README's production step, done to the tuned file itself: ``@triton.autotune``
    becomes ``@tuner.autotune``. The configs follow the kernel's own source (its identity),
    not the file's hash, so they are served exact and not stale."""
    prod = tmp_path / "prod"
    prod.mkdir()
    (prod / "byo_helpers.py").write_text((ROOT / "tests/kernels/byo_helpers.py").read_text())
    tuned_file = prod / "byo_multi.py"
    source = (ROOT / MULTI.split(":")[0]).read_text()
    tuned_file.write_text(source)
    env = {**cli_env, "TUNER_KERNEL_ROOTS": f"{ROOT}:{prod}"}
    run_cli(["tune", f"{tuned_file}:scale_and_sum", "--shape", "n=4096", "--backend",
             "interpret", "--trials", "2", "--seed", "0", "--confirm-top", "0"], env,
            check=True, timeout=600)
    tuned_file.write_text(source.replace("import triton\n", "import triton\n\nimport tuner\n", 1)
                          .replace("@triton.autotune(", "@tuner.autotune("))
    served = subprocess.run(
        [sys.executable, "-c", SERVED_SCRIPT, str(prod)], env={**env, "TRITON_INTERPRET": "1"},
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    answer = json.loads(served.stdout.strip().splitlines()[-1])
    assert answer["tier"] == "exact" and answer["stale"] == [], answer


LIBRARY = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                 key=["n"])
@triton.jit
def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def _plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def double(x):
    y = torch.empty_like(x)
    _double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


def double_fixed(x):  # the launcher picks its own block: nothing autotuned to tune
    y = torch.empty_like(x)
    _plain_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y
'''
USER = '''
import torch
from mylib import double, double_fixed


def double_inputs(n, dtype, device):
    return (torch.rand(n, dtype=dtype, device=device),)


def double_reference(x):
    return x * 2


double_fixed_inputs, double_fixed_reference = double_inputs, double_reference
'''


def test_a_launcher_imported_from_a_library_is_tuned_or_told_what_to_do(cli_env, tmp_path):
    """The kernel a library's launcher launches lives in the library's module: found there;
    when it is not autotuned, the error says to import and name it, not to decorate it."""
    folder = tmp_path / "lib"
    folder.mkdir(mode=0o755)  # listable: `import mylib` looks the folder up
    (folder / "mylib.py").write_text(LIBRARY)
    (folder / "use_lib.py").write_text(USER)
    env = {**cli_env, "TUNER_KERNEL_ROOTS": f"{ROOT}:{folder}"}
    tuned = run_cli(["tune", f"{folder}/use_lib.py:double", "--shape", "n=1000",
                     "--dtype", "fp32", "--backend", "interpret", "--trials", "2",
                     "--confirm-top", "0"], env, timeout=300)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert "_double_kernel n1000 fp32" in tuned.stdout, tuned.stdout
    fixed = run_cli(["tune", f"{folder}/use_lib.py:double_fixed", "--shape", "n=1000",
                     "--dtype", "fp32", "--backend", "interpret", "--trials", "2"], env,
                    timeout=300)
    assert fixed.returncode == 2, fixed.stdout + fixed.stderr
    said = " ".join(fixed.stderr.split())
    assert "double_fixed launches _plain_kernel: @triton.jit without @triton.autotune" in said
    assert "write a launcher that launches _plain_kernel" in said, said


def test_an_error_in_the_users_hook_points_at_the_users_code(cli_env, tmp_path):
    """An exception in the user's ``early_config_prune`` names the user's function, file and
    line in the summary and in ``tuner status``, not a bare ``KeyError``."""
    folder = tmp_path / "lib"
    folder.mkdir(mode=0o755)
    (folder / "byo_helpers.py").write_text((ROOT / "tests/kernels/byo_helpers.py").read_text())
    source = (ROOT / MULTI.split(":")[0]).read_text()
    hook = "def _no_big_blocks(configs, named_args, **kwargs):  # type: ignore[no-untyped-def]\n"
    assert hook in source
    bad = folder / "byo_bad_prune.py"
    bad.write_text(source.replace(hook, hook + "    named_args['nope']\n"))
    line = bad.read_text().splitlines().index("    named_args['nope']") + 1
    env = {**cli_env, "TUNER_KERNEL_ROOTS": f"{ROOT}:{folder}"}
    tuned = run_cli(["tune", f"{bad}:scale_and_sum", "--shape", "n=4096", "--backend",
                     "interpret", "--trials", "2"], env, timeout=300)
    where = f"KeyError: 'nope' (in _no_big_blocks, byo_bad_prune.py:{line})"
    assert tuned.returncode == 1 and where in tuned.stdout, tuned.stdout + tuned.stderr
    status = run_cli(["status", "1"], env, check=True)
    assert where in " ".join(status.stdout.split()), status.stdout


def test_the_use_autotune_example_is_served_what_byo_softmax_tuned(cli_env):
    """``examples/use_autotune.py`` holds ``byo_softmax.py``'s kernel with the decorator
    swapped: the same kernel source, so the same stored configs."""
    run_cli(["tune", "examples/byo_softmax.py:softmax", "--shape", "n_rows=64,n_cols=1000",
             "--dtype", "fp32", "--backend", "interpret", "--trials", "2", "--confirm-top",
             "0"], cli_env, check=True, timeout=300)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "use_autotune.py")],
                          env={**cli_env, "TRITON_INTERPRET": "1"}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tier exact (tuned for {'n_rows': 64, 'n_cols': 1000} on cpu)" in proc.stdout, \
        proc.stdout
