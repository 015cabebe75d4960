"""Shared fixtures. Kernels run under Triton's interpreter in this process (no GPU here)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from tuner.core.settings import Settings
from tuner.testing.services import PostgresServer
from tuner.testing.services import RedisServer

ROOT = Path(__file__).resolve().parent.parent
REPLAY_DIR_CANDIDATES = (ROOT / "benchmarks" / "data" / "replay",
                         ROOT.parent / "shared" / "data" / "replay")
FAULT_KERNEL = str(ROOT / "tests" / "kernels" / "fault_kernel.py")


#: The order the tiers run in: the slow ones first, so the many short tests of the fast tier
#: are what is left at the end, where an idle worker steals them (``--dist worksteal``) and
#: no worker waits alone for a long test begun late.
TIER_ORDER = ("fleet", "process", "gpu", "fast")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the tiers in ``TIER_ORDER`` (stable within a tier); every worker sorts alike."""
    def tier(item: pytest.Item) -> int:
        parts = Path(str(item.path)).relative_to(ROOT).parts
        name = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
        return TIER_ORDER.index(name) if name in TIER_ORDER else len(TIER_ORDER)

    items.sort(key=tier)


def replay_file(name: str) -> Path:
    """A recorded space from the repository (or the shared folder beside it)."""
    for folder in REPLAY_DIR_CANDIDATES:
        if (folder / name).is_file():
            return folder / name
    pytest.skip(f"recorded space {name} not found")


def passable(path: Path) -> Path:
    """``path`` and the folders above it up to /tmp passable (not listable) by other users:
    sandboxed bench processes run as users of their own (``tuner.core.isolation``) and must
    reach their tenant folder and the test's kernel files."""
    for folder in (path, *path.parents):
        if folder in (Path("/"), Path(tempfile.gettempdir())):
            break
        folder.chmod(folder.stat().st_mode | 0o011)
    return path


@pytest.fixture()
def tmp_path(tmp_path: Path) -> Path:
    """pytest's ``tmp_path``, passable by the sandbox users (see ``passable``)."""
    return passable(tmp_path)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared across the session so the host calibration runs once."""
    return passable(tmp_path_factory.mktemp("cache"))


@pytest.fixture()
def settings(tmp_path: Path, cache_dir: Path) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'tuner.db'}", cache_dir=cache_dir,
                    kernel_roots=(ROOT,))


@pytest.fixture()
def cli_env(tmp_path: Path, cache_dir: Path) -> dict[str, str]:
    """Environment for ``tuner`` subprocesses: private data dir, shared cache, repo root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    env.update(TUNER_DATA_DIR=str(tmp_path / "data"), TUNER_CACHE_DIR=str(cache_dir),
               TUNER_KERNEL_ROOTS=str(ROOT), PYTHONUNBUFFERED="1", COLUMNS="200")
    env.pop("TRITON_INTERPRET", None)
    return env


def db_rows(db_url: str, sql: str) -> list[Any]:
    """Every row of ``sql`` on ``db_url`` (a fresh engine, disposed after)."""
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql)).all())
    finally:
        engine.dispose()


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600,
            check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"tuner {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def run_cli_here(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``tuner ARGS`` in this process (typer's runner), as ``run_cli`` reports it: for input
    the CLI refuses before any work starts (seconds saved per case: no interpreter start, no
    torch import). Each such test file keeps one case through ``run_cli`` so the exit status
    and stderr of a real process stay checked."""
    from typer.testing import CliRunner

    from tuner.cli.commands import app

    result = CliRunner().invoke(app, args, env=env)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture()
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.close()
