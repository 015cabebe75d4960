"""One timer per GPU: local bench processes are spread over the visible GPUs, never two on one,
and a logical index pins the GPU the service itself calls by it."""

from __future__ import annotations

import re

import pytest

from tuner.app import local
from tuner.core.isolation import SandboxPolicy
from tuner.core.isolation import open_sandbox
from tuner.core.parsing import UsageError
from tuner.core.settings import Settings
from tuner.measure.bench_process import BenchProcess
from tuner.measure.gpus import bench_backends
from tuner.measure.gpus import gpu_count
from tuner.measure.gpus import parse_devices
from tuner.measure.gpus import physical_gpu

FOUR = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def test_parallel_bench_processes_get_one_gpu_each():
    assert bench_backends("cuda", 3, env=FOUR) == ["cuda:0", "cuda:1", "cuda:2"]
    assert bench_backends("cuda", 1, env=FOUR) == ["cuda"]
    assert bench_backends("interpret", 3, env=FOUR) == ["interpret"] * 3


def test_devices_name_the_gpus_and_set_the_parallelism():
    assert bench_backends("cuda", 1, (0, 2, 3), env=FOUR) == ["cuda:0", "cuda:2", "cuda:3"]
    assert bench_backends("cuda", 3, (3, 1, 0), env=FOUR) == ["cuda:3", "cuda:1", "cuda:0"]


@pytest.mark.parametrize(("backend", "parallel", "devices", "message"), [
    ("cuda", 5, (), "needs 5 GPUs (one timer per GPU); this host shows 4"),
    ("cuda:1", 2, (), "would put 2 timers on it"),
    ("cuda", 2, (0, 1, 2), "disagree"),
    ("cuda", 1, (0, 7), "GPU 7 is not visible"),
    ("interpret", 1, (0,), "applies to --backend cuda only"),
    ("cuda:0", 1, (1,), "names one GPU"),
])
def test_two_timers_on_one_gpu_are_refused(backend, parallel, devices, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        bench_backends(backend, parallel, devices, env=FOUR)


def test_an_uncountable_host_asks_for_devices(monkeypatch):
    monkeypatch.setattr("tuner.measure.gpus.gpu_count", lambda env=None: None)
    with pytest.raises(UsageError, match="name them with --devices"):
        bench_backends("cuda", 2, env={})
    assert bench_backends("cuda", 1, (4, 6), env={}) == ["cuda:4", "cuda:6"]


def test_visible_devices_count_and_map_logical_indices():
    env = {"CUDA_VISIBLE_DEVICES": "2,5"}
    assert gpu_count(env) == 2 and gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert physical_gpu(1, env) == "5" and physical_gpu(1, {}) == "1"
    with pytest.raises(UsageError, match="cuda:2 is not visible"):
        physical_gpu(2, env)


@pytest.mark.parametrize("text", ["", "0,,1", "a", "-1", "0,0"])
def test_malformed_devices_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_devices(text)


def test_a_bench_process_pins_the_physical_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    sandbox = open_sandbox("t", tmp_path, SandboxPolicy(isolate=False, off=True))
    env = BenchProcess("cuda:1", cache_dir=tmp_path)._env(sandbox)
    assert env["CUDA_VISIBLE_DEVICES"] == "5"


def test_local_runs_start_one_backend_per_gpu(monkeypatch, tmp_path):
    """``tuner tune --parallel 3 --backend cuda`` on a fake four-GPU host."""
    started: list[str] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def start(self) -> None:
            started.append(self.name)

        def close(self) -> None:
            pass

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(local, "make_backend", lambda name, **kw: Fake(name))
    settings = Settings(db_url="sqlite://", cache_dir=tmp_path)
    local.start_backends("cuda", 3, settings)
    assert started == ["cuda:0", "cuda:1", "cuda:2"]
