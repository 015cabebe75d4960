"""A job's kernel code against the host and the other tenants, with real processes: it runs
in a process that serves only its job, as a user of its own with no network (where the host
allows: ``tuner.core.isolation``), and nothing it starts outlives its trial or escapes its
memory cap. Each attack is also run where the defence is off, to show the probe would see it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import run_cli
from tests.process.test_hostile_kernels import MARKER_URL
from tests.process.test_hostile_kernels import _leaked
from tests.processes import running
from tuner.core.isolation import SandboxPolicy
from tuner.core.isolation import open_sandbox
from tuner.core.sandbox_ids import lease_uid
from tuner.core.sandbox_ids import processes
from tuner.core.types import BenchmarkRequest
from tuner.core.types import TimingSettings
from tuner.measure.bench_process import BenchProcess

pytestmark = pytest.mark.integration

POLICY = SandboxPolicy.from_env()
needs_isolation = pytest.mark.skipif(
    not POLICY.isolate, reason=f"kernels cannot run as users of their own here: {POLICY.why_not}")
TENANT_KERNEL = ROOT / "tests" / "kernels" / "tenant_kernel.py"


@pytest.fixture()
def server() -> Iterator[int]:
    """A TCP server on loopback that accepts anyone; yields its port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join()
    sock.close()


def _escape(cli_env: dict[str, str], tmp_path: Path, port: int, sandbox: str) -> str:
    """Run the ``escape`` kernel from a copy beside its targets; its error says what it did."""
    kernels = tmp_path / f"kernels-{sandbox}"
    kernels.mkdir()
    shutil.copy(TENANT_KERNEL, kernels / "tenant_kernel.py")
    db = Path(cli_env["TUNER_DATA_DIR"]) / "tuner.db"
    other = Path(cli_env["TUNER_CACHE_DIR"]) / "sandbox" / "job-999" / "triton"
    other.mkdir(parents=True, exist_ok=True)
    other.chmod(0o2770)
    service = tmp_path / "service_code.py"
    service.write_text("VERSION = 1\n")
    site = tmp_path / "site-packages"
    site.mkdir(exist_ok=True)
    targets = [str(db), str(other), str(service), str(site)]
    (kernels / "targets.json").write_text(json.dumps(targets))
    env = {**cli_env, "TUNER_SANDBOX": sandbox, "TUNER_KERNEL_ROOTS": str(kernels)}
    run_cli(["tune", "--kernel", f"{kernels / 'tenant_kernel.py'}:ESCAPE", "--shape",
             f"N={port}", "--trials", "1", "--backend", "interpret", "--confirm-top", "0"], env)
    ((status, error),) = db_rows(f"sqlite:///{db}", "SELECT status, error FROM tuner_trials")
    db.unlink()
    assert status == "crashed" and "escape:" in error, error
    return str(error)


@needs_isolation
def test_a_kernel_reaches_no_server_and_writes_no_shared_file(cli_env, tmp_path, server):
    opened = _escape(cli_env, tmp_path, server, "off")  # A/B: the probe sees what is open
    assert "connect=connected" in opened and "service_code.py" in opened, opened
    sandboxed = _escape(cli_env, tmp_path, server, "auto")
    assert "connect=connected" not in sandboxed, sandboxed
    assert "writes=[]" in sandboxed, sandboxed


NOBODY = 65534


@needs_isolation
def test_a_shell_wrappers_credentials_are_out_of_reach(cli_env, tmp_path):
    """``sh -c 'tuner tune …'``: the shell holds the credential and is not protected. A service
    running as an ordinary user (here ``nobody``) with the sandbox off runs kernels as that
    same user, and the kernel reads the shell's environment; a service running as root runs
    them as users of their own, and it reads nothing."""
    def probe(as_nobody: bool) -> str:
        data = tmp_path / f"data-{as_nobody}"
        cache = tmp_path / f"cache-{as_nobody}"
        env = {**cli_env, "TUNER_BROKER_URL": MARKER_URL, "TUNER_DATA_DIR": str(data),
               "TUNER_CACHE_DIR": str(cache), "HOME": str(tmp_path),
               "TUNER_SANDBOX": "off" if as_nobody else "auto"}
        command = (f"{sys.executable} -m tuner.cli tune --kernel {FAULT_KERNEL}:PROBE "
                   "--shape N=100 --trials 1 --backend interpret --confirm-top 0; true")
        prefix: list[str] = []
        if as_nobody:
            for folder in (data, cache):
                folder.mkdir()
                os.chown(folder, NOBODY, NOBODY)
            prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        subprocess.run([*prefix, "sh", "-c", command], env=env, cwd=ROOT, capture_output=True,
                       timeout=300, check=True)
        ((error,),) = db_rows(f"sqlite:///{data / 'tuner.db'}", "SELECT error FROM tuner_trials")
        return str(error)

    assert _leaked(probe(as_nobody=True)), "the probe should find the wrapper's credential"
    assert _leaked(probe(as_nobody=False)) == []


def _leftovers(since: float) -> tuple[list[int], list[Path]]:
    files = [p for p in Path("/dev/shm").glob("tuner-escape-*") if p.stat().st_mtime >= since]
    return running(b"tuner-escape-"), files


def test_a_double_forked_grandchild_dies_with_its_trial(cli_env):
    """It holds the bench process's pipes: before, ``tuner tune`` never exited."""
    started = time.time() - 1
    proc = run_cli(["tune", "--kernel", f"{TENANT_KERNEL}:FORK_ESCAPE", "--shape", "N=100",
                    "--trials", "1", "--backend", "interpret", "--confirm-top", "0"],
                   cli_env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deadline = time.monotonic() + 10
    while running(b"tuner-escape-") and time.monotonic() < deadline:
        time.sleep(0.1)
    pids, files = _leftovers(started)
    assert pids == [], "the grandchild outlived its trial"
    if POLICY.isolate:  # its files in /dev/shm are its user's: deleted with it
        assert files == [], files
    for path in files:
        path.unlink()


@needs_isolation
def test_an_orphan_of_a_sandbox_user_nobody_holds_is_reaped_at_the_next_lease(tmp_path,
                                                                             monkeypatch):
    """What nothing could clean up when the service holding the lease was SIGKILLed: a
    double-forked process of a sandbox user id nobody holds now. The next lease on the host
    kills it; a process of an id a live sandbox holds is left alone. (Ids outside the default
    range, so no sandbox of a test running beside this one is touched.)"""
    policy = dataclasses.replace(POLICY, lock_dir=tmp_path / "locks", uids=(260_000, 50))
    held_uid, held_lock = lease_uid(policy.lock_dir, policy.uids)
    orphan_uid = 260_000 + (held_uid - 260_000 + 1) % 50

    def sleeper(uid: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(300)"],
                                user=uid, group=uid, extra_groups=[], env={},
                                start_new_session=True)

    held, orphan = sleeper(held_uid), sleeper(orphan_uid)
    sandbox = None
    try:
        deadline = time.monotonic() + 10  # both are up before the next lease
        while {held_uid, orphan_uid} - {u for _, u, _ in processes()}:
            assert time.monotonic() < deadline, "the sleepers did not start"
            time.sleep(0.05)
        # the next lease takes yet another id (reusing the orphan's would kill it anyway)
        monkeypatch.setattr("tuner.core.sandbox_ids.random.randrange",
                            lambda n: (orphan_uid + 1 - 260_000) % n)
        sandbox = open_sandbox("tenant-after-a-crash", tmp_path / "cache", policy)
        assert sandbox.uid == 260_000 + (orphan_uid + 1 - 260_000) % 50
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert held.poll() is None, "a live sandbox's process was killed"
    finally:
        for proc in (held, orphan):
            proc.kill()
            proc.wait()
        held_lock.close()
        if sandbox is not None:
            sandbox.release()


def test_the_memory_cap_covers_what_a_kernel_starts(cli_env):
    run_cli(["tune", "--kernel", f"{TENANT_KERNEL}:FORK_HOG", "--shape", "N=100",
             "--trials", "1", "--backend", "interpret", "--confirm-top", "0",
             "--bench-memory", "0.75"], cli_env, timeout=120)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    ((status, error),) = db_rows(db, "SELECT status, error FROM tuner_trials")
    assert status == "out_of_resources" and "cap of 0.75 GiB" in error, error
    assert running(b"tuner-escape-") == []


def test_describing_a_kernel_is_held_to_the_memory_cap(cli_env, tmp_path):
    module = tmp_path / "hog_at_import.py"
    module.write_text("import time\ndata = bytearray(2 << 30)\n"
                      "for i in range(0, len(data), 4096):\n    data[i] = 1\n"
                      "time.sleep(30)\nK = None\n")
    env = {**cli_env, "TUNER_BENCH_MEMORY_GB": "0.5", "TUNER_KERNEL_ROOTS": str(tmp_path)}
    proc = run_cli(["tune", "--kernel", f"{module}:K", "--shape", "N=10"], env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "used more than 0.50 GiB" in proc.stderr, proc.stderr


def _request(kernel: str, job: int, mode: str) -> BenchmarkRequest:
    return BenchmarkRequest(trial_id=job, attempt=1, job_id=job, kernel=kernel,
                            problem={"N": 100}, dtype="fp32",
                            params={"mode": mode, "BLOCK": 64}, backend="interpret",
                            device_kind="cpu", timing=TimingSettings(0, 5, 2, 5))


def test_a_job_cannot_rewrite_the_measuring_code_of_the_next(cache_dir):
    """A worker's bench process serves one job: the patch of job 1 cannot make job 2's wrong
    kernel pass. (A/B: within job 1 the patch does work.)"""
    process = BenchProcess("interpret", cache_dir=cache_dir, kernel_roots=(ROOT,))
    ref = str(TENANT_KERNEL)
    try:
        assert process.run(_request(f"{ref}:PATCH", 1, "patch")).status == "ok"
        same_job = process.run(_request(f"{ref}:WRONG", 1, "wrong"))
        assert same_job.status == "ok", same_job  # the patch took: the probe is sensitive
        other_job = process.run(_request(f"{ref}:WRONG", 2, "wrong"))
        assert other_job.status == "wrong_result", other_job
    finally:
        process.close()


def test_a_kernel_file_edited_between_jobs_is_imported_anew(cache_dir, tmp_path):
    module = tmp_path / "edited.py"
    source = TENANT_KERNEL.read_text()
    module.write_text(source)
    process = BenchProcess("interpret", cache_dir=cache_dir, kernel_roots=(tmp_path,))
    try:
        assert process.run(_request(f"{module}:OK", 1, "ok")).status == "ok"
        module.write_text(source.replace("mode, delta = config[\"mode\"], 1.0",
                                         "mode, delta = config[\"mode\"], 3.0"))
        os.utime(module)
        assert process.run(_request(f"{module}:OK", 2, "ok")).status == "wrong_result"
    finally:
        process.close()
