"""Roofline scoring against hand-computed cases, and device-name normalisation."""

from __future__ import annotations

import pytest

from tuner.core.devices.datasheets import DEVICES
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.devices.datasheets import target_limits
from tuner.core.roofline import roof
from tuner.core.roofline import score
from tuner.core.types import Measurement


def _ok(**fields) -> Measurement:
    return Measurement(status="ok", n=10, **fields)


def test_compute_bound_bf16_matmul_on_h100_sxm():
    # 8192^3 bf16: 2*8192^3 = 1,099,511,627,776 FLOP at 989 TFLOP/s = 1.111741 ms;
    # bytes 2*(3*8192^2) = 402,653,184 at 3.35 TB/s = 0.120195 ms -> compute-bound.
    m = _ok(median_ms=1.3896759704, flops=2 * 8192**3, min_bytes=2 * 3 * 8192**2,
            compute_dtype="bf16", device_kind="h100-sxm")
    s = score(m)
    assert s is not None
    assert s.bound == "compute" and s.basis == "datasheet"
    assert s.roof_ms == pytest.approx(1.111741, rel=1e-6)
    assert s.fraction == pytest.approx(0.8, rel=1e-6)
    assert s.tflops == pytest.approx(791.2, rel=1e-3)
    assert s.intensity == pytest.approx(8192 / 3, rel=1e-9)
    assert s.fraction_measured is None


def test_memory_bound_rmsnorm_on_h100_sxm():
    # rmsnorm 4096 x 8192 bf16: 4096*8192*(2+2) + 8192*2 + 4*4096 = 134,250,496 bytes
    # at 3350 GB/s = 0.0400747749 ms; measured 0.05 ms -> 0.801495 of the roof.
    m = _ok(median_ms=0.05, flops=4 * 4096 * 8192, min_bytes=134_250_496,
            compute_dtype="bf16", device_kind="h100-sxm")
    s = score(m)
    assert s is not None and s.bound == "memory"
    assert s.roof_ms == pytest.approx(0.0400747749, rel=1e-8)
    assert s.fraction == pytest.approx(0.801495498, rel=1e-6)
    assert s.gbps == pytest.approx(2685.0099, rel=1e-6)


def test_ridge_points_match_the_datasheets():
    assert roof(1, 1, 989, 3350).ridge == pytest.approx(295.2, abs=0.1)
    assert roof(1, 1, 989, 4800).ridge == pytest.approx(206.0, abs=0.1)
    assert roof(1, 1, 312, 2039).ridge == pytest.approx(153.0, abs=0.1)
    # square bf16 GEMM (AI = N/3) turns compute-bound above N = 3 x ridge ~ 885 on H100 SXM
    n = 886
    assert roof(2 * n**3, 2 * 3 * n * n, 989, 3350).bound == "compute"
    n = 884
    assert roof(2 * n**3, 2 * 3 * n * n, 989, 3350).bound == "memory"


def test_cpu_is_scored_against_its_measured_ceilings():
    ceilings = {"bandwidth_gbps": 10.0, "tflops": {"fp32": 0.1}}
    # 2e9 FLOP at 0.1 TFLOP/s = 20 ms; 1e8 B at 10 GB/s = 10 ms; measured 40 ms
    m = _ok(median_ms=40.0, flops=2e9, min_bytes=1e8, compute_dtype="fp32",
            device_kind="cpu", ceilings=ceilings)
    s = score(m)
    assert s is not None
    assert (s.basis, s.bound) == ("measured", "compute")
    assert s.fraction == pytest.approx(0.5) and s.fraction_measured == pytest.approx(0.5)


def test_gpu_gets_both_datasheet_and_measured_fractions():
    ceilings = {"bandwidth_gbps": 3000.0, "tflops": {"bf16": 800.0}}
    m = _ok(median_ms=0.05, flops=1e6, min_bytes=134_250_496, compute_dtype="bf16",
            device_kind="h100-sxm", ceilings=ceilings)
    s = score(m)
    assert s is not None
    assert s.fraction == pytest.approx(0.801495498, rel=1e-6)
    assert s.fraction_measured == pytest.approx(134_250_496 / 3000e9 * 1e3 / 0.05, rel=1e-9)


def test_replay_scores_against_the_recorded_optimum_and_failures_are_unscored():
    m = _ok(median_ms=4.0, recorded_best_ms=3.0, device_kind="nvidia-rtx-a4000")
    s = score(m)
    assert s is not None and s.basis == "recorded-best" and s.fraction == pytest.approx(0.75)
    assert score(Measurement(status="crashed")) is None
    assert score(_ok(median_ms=1.0, flops=1.0, min_bytes=1.0, compute_dtype="bf16",
                     device_kind="unknown-gpu")) is None


@pytest.mark.parametrize(("name", "kind"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 SXM5 80GB", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", "nvidia-h200-nvl"),
    ("NVIDIA GH200 480GB", "nvidia-gh200-480gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40", "nvidia-l40"),
    ("NVIDIA GeForce RTX 3090", "nvidia-geforce-rtx-3090"),
])
def test_device_name_normalisation(name, kind):
    assert normalise_device_name(name) == kind


def test_datasheet_table_is_dense_and_complete():
    for kind in ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "a100-40gb", "a100-80gb", "l40s",
                 "l4"):
        spec = DEVICES[kind]
        assert {"fp32", "tf32", "bf16", "fp16"} <= set(spec.tflops)
        assert spec.tflops["bf16"] == spec.tflops["fp16"]
    assert DEVICES["h100-sxm"].tflops["bf16"] == 989.0  # 1,979 sparse / 2
    assert target_limits("h200").smem_per_block_bytes == 232448
    assert target_limits("a100-80gb").smem_per_block_bytes == 166912
    assert target_limits("l4").smem_per_block_bytes == 101376


def test_charts_draw_the_roof_the_trials_were_scored_against():
    """A chart of CPU (or unknown-GPU) trials uses the ceilings stored with them; nothing is
    measured in the process that draws it."""
    from types import SimpleNamespace

    from tuner.charts import device_ceilings
    from tuner.charts import stored_ceilings

    measured = {"tflops": {"fp32": 0.5, "fp16": 0.1}, "bandwidth_gbps": 20.0}
    trials = [SimpleNamespace(provenance={}), SimpleNamespace(provenance={"ceilings": measured}),
              SimpleNamespace(provenance=None)]
    assert stored_ceilings(trials) == measured
    assert device_ceilings("cpu", stored_ceilings(trials)) == ({"fp32": 0.5, "fp16": 0.1}, 20.0)
    assert device_ceilings("cpu", None) is None
    sheet = DEVICES["h100-sxm"]
    assert device_ceilings("h100-sxm", measured) == (dict(sheet.tflops), sheet.bandwidth_gbps)


def test_the_chart_roof_is_the_job_dtype():
    from tuner.charts import roof_dtype

    peaks = {"fp32": 67.0, "tf32": 495.0, "bf16": 989.0, "fp8": 1979.0}
    assert roof_dtype("fp32", peaks) == "fp32"  # not the bf16 roof an fp32 job cannot reach
    assert roof_dtype("fp8e4m3", peaks) == "fp8"
    assert roof_dtype("int4", peaks) is None and roof_dtype(None, peaks) is None
