"""One CLI as a newcomer meets it: `python -m tuner`, `--version`, help without value labels on
flags, tables that a pipe does not cut, and a fleet job that says why it does not move."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT
from tests.conftest import run_cli


def test_python_m_tuner_and_version(cli_env):
    proc = subprocess.run([sys.executable, "-m", "tuner", "--version"], env=cli_env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tuner ") and "triton" in proc.stdout and "torch" in proc.stdout


def test_help_has_no_flag_placeholders_and_piped_tables_are_whole(cli_env):
    for command in (["--help"], ["tune", "--help"], ["best", "--help"], ["status", "--help"]):
        proc = run_cli(command, cli_env)
        assert proc.returncode == 0 and "<bool>" not in proc.stdout, proc.stdout
    kernels = json.loads(run_cli(["kernels", "--json"], cli_env, check=True).stdout)
    assert {"matmul", "softmax", "attention"} <= {k["name"] for k in kernels}
    run_cli(["tune", "matmul", "--shape", "M=16,N=16,K=16", "--backend", "interpret",
             "--trials", "1", "--confirm-top", "0"], cli_env, check=True, timeout=300)
    table = run_cli(["status"], cli_env, check=True).stdout  # piped: no terminal width
    assert max(len(line) for line in table.splitlines()) > 80  # not cut at 80 columns
    assert "…" not in table, table
    jobs = json.loads(run_cli(["status", "--json"], cli_env, check=True).stdout)
    assert jobs[0]["kernel"] == "matmul" and jobs[0]["problems"][0]["key"] == "M16-N16-K16"


def test_a_job_no_worker_serves_says_so(cli_env, tmp_path):
    submitted = run_cli(["submit", "matmul", "--shape", "M=16,N=16,K=16", "--backend",
                         "interpret", "--trials", "2"], cli_env, timeout=300)
    assert submitted.returncode == 0, submitted.stderr
    assert "no live worker serves cpu" in submitted.stderr
    # Ctrl-C's default action in the child, even where the suite itself was started with SIGINT
    # ignored (a background job of a non-interactive shell), which a child would inherit.
    watch = subprocess.Popen([sys.executable, "-m", "tuner", "watch", "1"], env=cli_env,
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(12)
    watch.send_signal(signal.SIGINT)
    _, err = watch.communicate(timeout=60)
    assert "waiting: no live worker serves cpu" in err, err
    assert "Traceback" not in err


def test_the_next_step_a_replayed_job_prints_serves_its_best(cli_env):
    """The ``next:`` line after a replayed job names the recording's kernel and GPU (not
    ``replay`` and this host), so running it as printed serves the job's best config."""
    recording = ROOT / "benchmarks" / "data" / "replay" / "pnpoly_RTX_3090.json.gz"
    tuned = run_cli(["tune", "replay", "--backend", f"replay:{recording}", "--trials", "4"],
                    cli_env, check=True, timeout=300)
    hint = next(line for line in tuned.stdout.splitlines() if line.startswith("next:"))
    best_command = hint.split(" · ")[-1].split()
    assert best_command[:2] == ["tuner", "best"] and "replay" not in best_command, hint
    served = run_cli(best_command[1:], cli_env)
    assert served.returncode == 0, served.stdout + served.stderr
    jobs = run_cli(["status"], cli_env, check=True).stdout  # the recording by its file name
    assert "replay:pnpoly_RTX_3090.json.gz" in jobs, jobs
    status = json.loads(run_cli(["status", "1", "--json"], cli_env, check=True).stdout)
    assert json.loads(served.stdout) == status[0]["problems"][0]["best_config"]
