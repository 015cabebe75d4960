"""One contract for every backend (DESIGN.md decision 9): interpret, replay and, with a GPU,
cuda. A backend answers a valid config with a timed, scorable measurement and a bad config
with a failure status, never an exception."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from search_spaces.recorded import load_recording
from tests.conftest import ROOT
from tests.conftest import replay_file
from tuner.core.roofline import score
from tuner.core.types import BenchmarkRequest
from tuner.core.types import TimingSettings
from workers.backends.base import Backend
from workers.backends.base import make_backend

MATMUL_OK = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4,
             "num_stages": 2}
MATMUL_BAD = {**MATMUL_OK, "BLOCK_K": 48}  # not a power of two: Triton rejects it


def _replay_name() -> str:
    return f"replay:{replay_file('convolution_A4000.json.gz')}"


def _cases(name: str) -> tuple[dict, dict, dict, str]:
    """(problem, good params, bad params, expected bad status) for a backend."""
    if name.startswith("replay:"):
        rec = load_recording(name.split(":", 1)[1])
        good = next(e for e in rec.entries.values() if not isinstance(e["time"], str))
        bad = next(e for e in rec.entries.values() if e["time"] == "CompilationFailedConfig")
        return (rec.problem(), {k: good[k] for k in rec.keys}, {k: bad[k] for k in rec.keys},
                "compile_error")
    return {"M": 64, "N": 64, "K": 64}, MATMUL_OK, MATMUL_BAD, "compile_error"


BACKENDS = [
    pytest.param("interpret", id="interpret"),
    pytest.param("replay", id="replay"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU")]),
]


@pytest.fixture(params=BACKENDS)
def backend(request, cache_dir) -> Iterator[Backend]:
    name = _replay_name() if request.param == "replay" else request.param
    b = make_backend(name, cache_dir=cache_dir, kernel_roots=(ROOT,))
    b.start()
    yield b
    b.close()
    b.close()  # closing twice is harmless


def _request(backend: Backend, problem: dict, params: dict, trial_id: int = 1):
    return BenchmarkRequest(
        trial_id=trial_id, attempt=1, job_id=1, kernel="replay" if backend.name.startswith(
            "replay") else "matmul", problem=problem, dtype="fp16", params=params,
        backend=backend.name, device_kind="any",
        timing=TimingSettings(warmup_ms=0, rep_ms=10, min_reps=3, max_reps=10))


def test_describe_names_the_device(backend):
    info = backend.describe()
    assert info["device_kind"] and info["backend"] in ("interpret", "replay", "cuda")


def test_valid_config_gives_a_scorable_timed_measurement(backend):
    problem, good, _, _ = _cases(backend.name)
    m = backend.run(_request(backend, problem, good))
    assert m.status == "ok", m.error
    assert m.median_ms > 0 and m.n >= 1
    assert m.p20_ms <= m.median_ms <= m.p80_ms or backend.name.startswith("replay:")
    assert m.device_kind == backend.describe()["device_kind"]
    assert m.provenance["backend"] == backend.describe()["backend"]
    s = score(m)
    assert s is not None and 0 < s.fraction <= 1.0 + 1e-9


def test_bad_config_is_a_status_not_an_exception(backend):
    problem, _, bad, status = _cases(backend.name)
    assert backend.run(_request(backend, problem, bad)).status == status
    broken = backend.run(_request(backend, problem, {"nonsense": 1}))
    assert broken.status in ("compile_error", "crashed") and broken.error
    # and the backend still serves the next request
    _, good, _, _ = _cases(backend.name)
    assert backend.run(_request(backend, problem, good, trial_id=2)).status == "ok"
