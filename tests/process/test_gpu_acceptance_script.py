"""The GPU acceptance script, run here at interpreter sizes so that it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_acceptance_script_runs_every_case_and_writes_its_json(cli_env, tmp_path):
    out = tmp_path / "acceptance"
    proc = subprocess.run([sys.executable, "benchmarks/gpu/acceptance.py", str(out), "--tiny"],
                          cwd=ROOT, env=cli_env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "acceptance.json").read_text())
    assert report["tiny"] and report["device_kind"] == "cpu"
    assert report["ceilings"]["bandwidth_gbps"] > 0
    kernels = {c["kernel"] for c in report["cases"]}
    assert kernels == {"matmul", "rmsnorm", "softmax", "linear+bias+gelu+residual+layernorm"}
    serial = [c for c in report["cases"] if c["case"].endswith(" serial")]
    assert [c["compile_procs"] for c in serial] == [0] and not serial[0]["impls"]
    assert serial[0]["device_time"]["configs_per_device_hour"] > 0
    assert set(report["targets"]["serial_vs_pipelined"]) == {"matmul 64^3"}
    for case in report["cases"]:
        assert "error" not in case, case
        if case in serial:
            continue
        assert case["max_rel_error"] <= 1e-2
        impls = case["impls"]
        assert {"tuned", "triton-default", "torch"} <= set(impls)
        assert impls["torch.compile"]["skipped"].startswith("skipped")
        for name in ("tuned", "triton-default", "torch"):
            assert impls[name]["median_ms"] > 0 and impls[name]["fraction"] > 0
        assert case["speedup"]["torch"] == impls["torch"]["median_ms"] / \
            impls["tuned"]["median_ms"]
        device_time = case["device_time"]  # the tuning run's own device time
        assert device_time["gpu_seconds"] > 0 and 0 < device_time["busy_fraction"] <= 1
    targets = report["targets"]
    assert targets["matmul_geomean_vs_triton_default"] > 0
    assert set(targets["rows_fraction_of_copy_bandwidth"]) == {"rmsnorm 8x200", "softmax 8x200"}
    assert "targets:" in proc.stdout and "triton-default" in proc.stdout
    assert set(targets["device_busy_fraction"]) == {c["case"] for c in report["cases"]}
    assert "device-s held, busy" in proc.stdout
