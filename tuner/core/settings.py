"""One settings object, read from the environment at the edge and passed down.

Nothing below the CLI, the worker entry points and the lookup's first call reads the
environment: they receive a ``Settings``. Tests build ``Settings(...)`` directly.

Variables:

* ``TUNER_DB_URL``: SQLAlchemy URL of the database, SQLite or PostgreSQL
  (default ``sqlite:///<data dir>/tuner.db``);
* ``TUNER_DATA_DIR``: folder of the default SQLite file
  (default ``$XDG_DATA_HOME/tuner``, i.e. ``~/.local/share/tuner``);
* ``TUNER_CACHE_DIR``: calibration and compile caches (default ``~/.cache/tuner``);
* ``TUNER_ARTIFACT_DIR``: roofline charts attached to studies, served by ``tuner dashboard``
  (default ``<data dir>/artifacts``; shared by the schedulers and the dashboard);
* ``TUNER_BROKER_URL``: Celery broker of the distributed service
  (default ``redis://127.0.0.1:6379/0``);
* ``TUNER_KERNEL_ROOTS``: ``:``-separated folders that user kernel files may be loaded from
  (default: the current directory);
* ``TUNER_HEARTBEAT_S``: seconds between worker heartbeats; a worker silent for three of them
  is presumed dead and its trials are requeued (default 10);
* ``TUNER_SCHEDULER_LEASE_S``: how long a scheduler's claim on a job lasts without renewal
  (default 30; a restarted scheduler resumes a job after at most this long);
* ``TUNER_REPUBLISH_S``: a queued trial unclaimed this long is published again, in case the
  broker lost its message (default 300; a broker that restarted is noticed within seconds and
  its queued trials are published again at once);
* ``TUNER_DB_URL_FILE`` / ``TUNER_BROKER_URL_FILE``: a file holding the URL (first line),
  used when the variable itself is unset: a password kept in a file (a Docker secret, a
  mode-600 file) is in no process's environment and on no command line;
* ``TUNER_REMOTE_CONTROL``: ``1`` turns Celery's remote control on for the workers (off by
  default: anyone who can write to the broker could otherwise stop or throttle them);
* ``TUNER_BENCH_MEMORY_GB``: host memory (resident set, GiB) one bench process may use before
  it is killed and its trial recorded ``out_of_resources`` (default half of the host's RAM).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path


def _xdg(var: str, fallback: str, env: Mapping[str, str]) -> Path:
    base = env.get(var) or str(Path(env.get("HOME", str(Path.home()))) / fallback)
    return Path(base) / "tuner"


def data_dir_of(env: Mapping[str, str] | None = None) -> Path:
    """The folder of the default SQLite file and other data: ``TUNER_DATA_DIR``, else
    ``$XDG_DATA_HOME/tuner`` (``~/.local/share/tuner``)."""
    env = os.environ if env is None else env
    if env.get("TUNER_DATA_DIR"):
        return Path(env["TUNER_DATA_DIR"])
    return _xdg("XDG_DATA_HOME", ".local/share", env)


#: Longest URL file read (bytes): a URL, not a data file.
MAX_URL_FILE_BYTES = 4096


def url_setting(env: Mapping[str, str], name: str) -> str | None:
    """``env[name]``, else the first line of the file ``env[name + "_FILE"]``, else None;
    ``ValueError`` (naming the variable, never the URL) for an unreadable or empty file."""
    if env.get(name):
        return env[name]
    path = env.get(f"{name}_FILE")
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_URL_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{name}_FILE: cannot read {path}: {exc.strerror}") from None
    lines = text.decode("utf-8", "replace").strip().splitlines()
    if len(text) > MAX_URL_FILE_BYTES or not lines:
        raise ValueError(f"{name}_FILE: {path} must hold one URL on its first line")
    return lines[0].strip()


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive, finite number from variable ``name`` (``default`` when unset);
    ``ValueError`` naming the variable otherwise."""
    text = env.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={text!r} must be a positive, finite number")
    return value


def gib_bytes(gib: float) -> int:
    """``gib`` GiB in bytes; ``ValueError`` unless it is a finite number above zero."""
    if not math.isfinite(gib) or gib <= 0 or gib > 1 << 20:
        raise ValueError(f"a bench memory cap must be a positive number of GiB, not {gib!r}")
    return int(gib * (1 << 30))


def default_bench_memory() -> int | None:
    """Half of this host's RAM, in bytes (``None`` where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class Settings:
    """Everything configurable about a process of the service."""

    db_url: str
    cache_dir: Path
    broker_url: str = "redis://127.0.0.1:6379/0"
    kernel_roots: tuple[Path, ...] = field(default_factory=tuple)
    heartbeat_s: float = 10.0
    scheduler_lease_s: float = 30.0
    republish_s: float = 300.0
    artifact_dir: Path | None = None
    #: Host-memory cap of one bench process in bytes (``None``: no cap).
    bench_memory_bytes: int | None = None
    #: Celery remote control on the workers (``TUNER_REMOTE_CONTROL``; off by default).
    remote_control: bool = False
    #: GPUs local bench processes time on (``tuner tune --devices``; ``tuner.measure.gpus``).
    gpus: tuple[int, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = data_dir_of(env)
        cache_dir = Path(env["TUNER_CACHE_DIR"]) if env.get("TUNER_CACHE_DIR") else _xdg(
            "XDG_CACHE_HOME", ".cache", env)
        db_url = url_setting(env, "TUNER_DB_URL") or f"sqlite:///{data_dir / 'tuner.db'}"
        roots_env = env.get("TUNER_KERNEL_ROOTS")
        roots = tuple(Path(p).resolve() for p in roots_env.split(":") if p) if roots_env else (
            Path.cwd().resolve(),)
        return cls(
            db_url=db_url,
            cache_dir=cache_dir,
            broker_url=url_setting(env, "TUNER_BROKER_URL") or "redis://127.0.0.1:6379/0",
            kernel_roots=roots,
            heartbeat_s=_positive(env, "TUNER_HEARTBEAT_S", 10.0),
            scheduler_lease_s=_positive(env, "TUNER_SCHEDULER_LEASE_S", 30.0),
            republish_s=_positive(env, "TUNER_REPUBLISH_S", 300.0),
            artifact_dir=Path(env["TUNER_ARTIFACT_DIR"]) if env.get("TUNER_ARTIFACT_DIR")
            else data_dir / "artifacts",
            bench_memory_bytes=gib_bytes(_positive(env, "TUNER_BENCH_MEMORY_GB", 0.0))
            if env.get("TUNER_BENCH_MEMORY_GB") else default_bench_memory(),
            remote_control=env.get("TUNER_REMOTE_CONTROL", "").lower() in ("1", "true", "yes"),
        )

    def with_bench_memory(self, gib: float | None) -> Settings:
        """A copy whose bench processes may use ``gib`` GiB (``None`` keeps this cap)."""
        return self if gib is None else replace(self, bench_memory_bytes=gib_bytes(gib))

    def with_db(self, db_url: str | None) -> Settings:
        """A copy pointing at another database (``None`` keeps this one)."""
        return self if db_url is None else replace(self, db_url=db_url)
