"""Every backend passes the one conformance kit (``tuner.testing.conformance``): interpret,
replay, model, the stand-in GPU alone and compiling ahead, the fake GPU that runs the real CUDA
timing code on a simulated clock, and — with a GPU — cuda; and every builder (one compile
process, a compile pool) passes the builder checks. Then
what only the fake GPU can show without a GPU: the order of the timing loop, the statistics it
reports and the provenance."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import torch

from tests.conftest import ROOT
from tests.conftest import replay_file
from tuner.core.roofline import score
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder
from tuner.measure.backends.registry import make_backend
from tuner.measure.backends.subprocess_backend import CompileBuilder
from tuner.measure.pipeline import CompilePool
from tuner.measure.pipeline import PipelinedBackend
from tuner.measure.timing import summarise
from tuner.testing import conformance
from tuner.testing.conformance import BUILDER_CHECKS
from tuner.testing.conformance import RUNNER_CHECKS
from tuner.testing.conformance import BackendCase
from tuner.testing.fake_cuda import FAKE_CLOCKS
from tuner.testing.fake_cuda import FAKE_DRIVER
from tuner.testing.fake_cuda import FAKE_NAME
from tuner.testing.fake_cuda import FAKE_UUID
from tuner.testing.fake_cuda import FakeClock
from tuner.testing.fake_cuda import FakeCudaBackend
from tuner.testing.fake_cuda import FakeCudaRuntime
from tuner.testing.fake_cuda import FakeFlushBuffer
from tuner.testing.fake_cuda import Op
from tuner.testing.fake_cuda import TimingLoopError
from tuner.testing.fake_cuda import timing_samples

BACKENDS = [
    pytest.param("interpret", id="interpret"),
    pytest.param("replay", id="replay"),
    pytest.param("model:h100-sxm", id="model"),
    pytest.param("standin:h100-sxm", id="standin"),
    pytest.param("pipelined", id="pipelined-standin"),
    pytest.param("fake-cuda", id="fake-cuda"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU")]),
]
BUILDERS = [pytest.param("process", id="compile-process"),
            pytest.param("pool", id="compile-pool")]


def _case(name: str) -> BackendCase:
    if name == "replay":
        return conformance.replay_case(replay_file("convolution_A4000.json.gz"))
    if name == "fake-cuda":
        return conformance.matmul_case("cuda")
    if name == "pipelined":
        return conformance.matmul_case("standin:h100-sxm")
    return conformance.matmul_case(name)


@pytest.fixture(scope="module", params=BACKENDS)
def subject(request, cache_dir) -> Iterator[tuple[Backend, BackendCase]]:
    case = _case(request.param)
    if request.param == "fake-cuda":
        backend: Backend = FakeCudaBackend(kernel_roots=(ROOT,))
    elif request.param == "pipelined":
        backend = PipelinedBackend(
            make_backend(case.backend, cache_dir=cache_dir, kernel_roots=(ROOT,)),
            CompilePool("h100-sxm", 1, cache_dir=cache_dir, kernel_roots=(ROOT,)))
    else:
        backend = make_backend(case.backend, cache_dir=cache_dir, kernel_roots=(ROOT,))
    backend.start()
    yield backend, case
    backend.close()
    backend.close()  # closing twice is harmless


@pytest.mark.parametrize("check", RUNNER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_backend_conformance(subject, check):
    backend, case = subject
    check(backend, case)


@pytest.fixture(scope="module", params=BUILDERS)
def builder(request, cache_dir) -> Iterator[Builder]:
    made: Builder = CompileBuilder("h100-sxm", cache_dir=cache_dir, kernel_roots=(ROOT,)) \
        if request.param == "process" else \
        CompilePool("h100-sxm", 2, cache_dir=cache_dir, kernel_roots=(ROOT,))
    made.start()
    yield made
    made.close()
    made.close()


@pytest.mark.parametrize("check", BUILDER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_builder_conformance(builder, check):
    check(builder, conformance.builder_case("h100-sxm"))


def test_a_builder_refuses_a_gpu_kind_without_a_datasheet_entry():
    with pytest.raises(ValueError, match="no datasheet entry for 'h999'"):
        CompileBuilder("h999")


@pytest.fixture(scope="module")
def fake_gpu() -> Iterator[FakeCudaBackend]:
    backend = FakeCudaBackend(kernel_roots=(ROOT,))
    backend.start()
    yield backend
    backend.close()


def test_fake_gpu_times_flush_record_launch_record_and_reports_those_samples(fake_gpu):
    case = conformance.matmul_case("cuda")
    log = fake_gpu.device.clock.log
    start = len(log)
    m = fake_gpu.run(conformance.request(case, case.good))
    assert m.status == "ok", m.error
    samples = timing_samples(log[start:])  # raises on any flush/record/launch out of order
    assert len(samples) == m.n >= case.timing.min_reps
    expected = summarise([s.duration_ms for s in samples])
    assert (m.median_ms, m.p20_ms, m.p80_ms, m.min_ms, m.cv) == pytest.approx(
        (expected.median_ms, expected.p20_ms, expected.p80_ms, expected.min_ms, expected.cv),
        rel=1e-12)
    # The flushes took time on the simulated clock, but none of it is in any sample.
    assert sum(1 for op in log[start:] if op.kind == "flush") >= m.n


def test_fake_gpu_provenance_and_score(fake_gpu):
    case = conformance.matmul_case("cuda")
    m = fake_gpu.run(conformance.request(case, case.good))
    p = m.provenance
    assert (p["device_name"], p["device_kind"], p["compute_capability"], p["uuid"],
            p["driver"], p["backend"]) == (FAKE_NAME, "h100-sxm", "9.0", FAKE_UUID,
                                           FAKE_DRIVER, "cuda")
    assert p["sm_count"] == 132 and p["triton"] and p["torch"]
    for key, value in FAKE_CLOCKS.items():  # read before and after the timing
        assert p[key] == value and p[f"after_{key}"] == value
    s = score(m)
    assert s.basis == "datasheet" and s.fraction_measured is not None
    assert 0 < s.fraction < s.fraction_measured  # the fake's ceilings are below the datasheet


def test_fake_gpu_confirmation_keeps_each_finalist_to_its_own_samples(fake_gpu):
    case = conformance.matmul_case("cuda")
    finalists = [{"trial_id": 20 + i, "params": p}
                 for i, p in enumerate((case.good, case.good_alt, case.good))]
    log = fake_gpu.device.clock.log
    start = len(log)
    outcome = fake_gpu.confirm(conformance.request(case, case.good, mode="confirm",
                                                   finalists=finalists, problem_id=1))
    timings = outcome.timings
    samples = timing_samples(log[start:])
    n = timings[0].n
    final = samples[-n * len(finalists):]  # read finalist by finalist after the rounds
    for i, t in enumerate(timings):
        mine = final[i * n:(i + 1) * n]
        assert {s.label for s in mine} == {str(i)}, "samples of another finalist"
        assert t.median_ms == pytest.approx(summarise([s.duration_ms for s in mine])
                                               .median_ms, rel=1e-12)
    # Each finalist is slower by design (1, 1.5, 2 × the base time), and it shows.
    medians = [t.median_ms for t in timings]
    assert medians == sorted(medians) and medians[2] > 1.5 * medians[0]
    # Interleaved: the rounds alternate the finalists' launches.
    launches = [op.label for op in log[start:] if op.kind == "launch"]
    assert any(a != b for a, b in itertools.pairwise(launches[-3 * n:]))


def test_the_timing_loop_check_catches_a_wrong_loop():
    clock = FakeClock()
    cuda, flush = FakeCudaRuntime(clock), FakeFlushBuffer(clock)

    def launch() -> None:
        clock.log.append(Op("launch", duration_ms=1.0, label="0"))
        clock.now_ms += 1.0

    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    flush.zero_()  # inside the timed region
    launch()
    end.record()
    with pytest.raises(TimingLoopError, match="synchronize"):
        start.elapsed_time(end)  # read before a synchronize
    cuda.synchronize()
    start.elapsed_time(end)
    with pytest.raises(TimingLoopError, match="not one launch alone"):
        timing_samples(clock.log)
    clock.log.clear()
    start.record()
    launch()
    end.record()
    cuda.synchronize()
    start.elapsed_time(end)
    with pytest.raises(TimingLoopError, match="not preceded by an L2 flush"):
        timing_samples(clock.log)
    assert len(timing_samples(clock.log, flush_l2=False)) == 1
