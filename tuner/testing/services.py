"""Private PostgreSQL and Redis servers for tests, on free loopback ports.

Tests start, stop and restart these to inject faults. PostgreSQL refuses to run as root, so as
root the cluster runs as the ``postgres`` user (``runuser``) with its data in a temporary
folder that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 30.0, up: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.1)
    raise TimeoutError(f"port {port} did not come {'up' if up else 'down'} in {timeout_s} s")


def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    exe = shutil.which(name)
    if exe is None:
        raise FileNotFoundError(f"PostgreSQL's {name} is not installed")
    return exe


class PostgresServer:
    """A throw-away PostgreSQL cluster with a ``tuner`` database (trust auth, loopback)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run([pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                   "--no-sync", "-E", "UTF8"])
        self.start()
        self._run([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                   "postgres", "tuner"])

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/tuner"

    def create_database(self, name: str) -> str:
        """A new empty database on this server; returns its URL."""
        self._run([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                   "postgres", name])
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, cmd: list[str]) -> None:
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, cwd="/tmp")

    def start(self) -> None:
        self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                   "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                         "-c fsync=off -c max_connections=200", "start"])
        wait_port(self.port)

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class RedisServer:
    """A throw-away ``redis-server`` on a free loopback port, no persistence."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tuner-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--maxmemory-policy", "noeviction"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        wait_port(self.port, up=False)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
