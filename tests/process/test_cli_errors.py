"""Bad input: one clear line, a non-zero exit, and nothing written — through a real ``tuner``
process (the exit status and stderr as a shell sees them; the full list of usage errors runs
in-process in ``tests/fast/test_cli_usage.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.conftest import run_cli
from tuner.testing.services import free_port

EMPTY = str(ROOT / "tests" / "kernels" / "empty_space.py") + ":EMPTY"


@pytest.mark.parametrize(("args", "message"), [  # every case runs in-process in tests/fast
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--backend", "tpu"], "unknown backend"),
    (["worker", "--device", "gpu"], "unknown device 'gpu'"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli_env, args, message):
    proc = run_cli([*args], cli_env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert message in proc.stderr
    assert not Path(cli_env["TUNER_DATA_DIR"]).exists()


def test_unreachable_or_malformed_database_url(cli_env):
    url = f"postgresql://nobody@127.0.0.1:{free_port()}/tuner"
    for db, message in ((url, "cannot reach the database"), ("nota://url", "database URL")):
        proc = run_cli(["tune", "matmul", "--shape", "M=4,N=4,K=4", "--backend", "interpret",
                        "--db", db], cli_env, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_malformed_url_in_the_environment_is_one_line(cli_env):
    for command in (["status"], ["workers"], ["best", "matmul", "--shape", "M=4,N=4,K=4",
                                              "--dtype", "fp16"]):
        env = {**cli_env, "TUNER_DB_URL": "garbage"}
        proc = run_cli(command, env, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "error: malformed database URL in TUNER_DB_URL: 'garbage' (expected "
            "sqlite:///path.db or postgresql://user:pass@host/db)"], proc.stderr


def test_a_busy_dashboard_port_and_an_unwritable_report_folder(cli_env, tmp_path):
    import socket

    run_cli(["tune", "matmul", "--shape", "M=16,N=16,K=16", "--backend", "interpret",
             "--trials", "1", "--confirm-top", "0"], cli_env, check=True, timeout=300)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli(["dashboard", "--port", str(port)], cli_env, timeout=120)
    assert proc.returncode == 2 and "cannot serve on 127.0.0.1:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    proc = run_cli(["report", "1", "--out", str(blocked / "report")], cli_env, timeout=300)
    assert proc.returncode == 2 and "cannot write the report" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_user_module_that_fails_to_import(cli_env, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import does_not_exist_anywhere\n")
    env = {**cli_env, "TUNER_KERNEL_ROOTS": str(tmp_path)}
    proc = run_cli(["tune", f"{bad}:K", "--shape", "N=1"], env)
    assert proc.returncode == 2 and "ModuleNotFoundError" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_help_explains_every_command(cli_env):
    proc = run_cli(["--help"], cli_env)
    for command in ("tune", "status", "best", "export", "dashboard", "kernels", "db"):
        assert command in proc.stdout
    tune = run_cli(["tune", "--help"], cli_env)
    assert "--shape" in tune.stdout and "roofline" in tune.stdout
