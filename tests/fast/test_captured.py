"""Captured kernels (``tuner capture``) without running a program: the problem of a launch,
the space around the library's choice, binding a launch, the selection ``--top``/
``--min-share`` makes, and the patch's choice of arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tuner.app.capture import capture_rows
from tuner.app.capture import merge
from tuner.app.capture import tune_groups
from tuner.core.parsing import UsageError
from tuner.kernels.captured import bind_launch
from tuner.kernels.captured import block_choices
from tuner.kernels.captured import derive_space
from tuner.kernels.captured import is_block_like
from tuner.kernels.captured import launch_problem
from tuner.kernels.captured import load_capture
from tuner.kernels.spec import KernelError


def test_a_launch_problem_is_its_tensor_sizes_and_positive_integer_scalars():
    args = {"X": torch.empty(4, 3), "Y": torch.empty(4, 3), "stride": 3, "offset": 0,
            "eps": 1e-5, "flag": True}
    assert launch_problem(args) == {"X_0": 4, "X_1": 3, "Y_0": 4, "Y_1": 3, "stride": 3}


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("BLOCK_SIZE", 128, True), ("BLOCK_M", 64, True), ("GROUP_SIZE_M", 8, True),
    ("BLOCK_SIZE", 96, False), ("HAS_WEIGHT", 1, False), ("BLOCK", True, False),
    ("eps", 1, False),
])
def test_block_like_meta_parameters(name, value, expected):
    assert is_block_like(name, value) is expected


def test_block_choices_are_powers_of_two_around_the_library_value():
    assert block_choices(128) == (32, 64, 128, 256, 512)
    assert block_choices(2) == (1, 2, 4, 8)


def _kernel(meta, num_warps=8, num_stages=None):
    return {"name": "k", "launches": [{"meta": meta, "num_warps": num_warps,
                                       "num_stages": num_stages, "args": []}]}


def test_the_space_varies_blocks_warps_and_stages_and_seeds_the_library_choice():
    space = derive_space(_kernel({"BLOCK_SIZE": 256, "HAS_BIAS": True}))
    assert [p.name for p in space.params] == ["BLOCK_SIZE", "num_warps", "num_stages"]
    assert space.seeds == ((("BLOCK_SIZE", 256), ("num_warps", 8), ("num_stages", 3)),)


def test_the_space_covers_every_launch_and_seeds_each_library_choice():
    kernel = _kernel({"BLOCK_SIZE": 128})
    kernel["launches"].append({"meta": {"BLOCK_SIZE": 2048}, "num_warps": 16,
                               "num_stages": 2, "args": []})
    space = derive_space(kernel)
    assert space.params[0].values() == (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    assert [dict(s)["BLOCK_SIZE"] for s in space.seeds] == [128, 2048]


def test_binding_fills_defaults_and_splits_constexprs_and_options():
    import triton.language as tl

    def fn(X, n, BLOCK: tl.constexpr, EVEN: tl.constexpr = True):
        pass

    x = torch.empty(8)
    bound = bind_launch(fn, (x, 8), {"BLOCK": 16, "num_warps": 2})
    assert bound.runtime == {"X": x, "n": 8}
    assert bound.meta == {"BLOCK": 16, "EVEN": True}
    assert bound.options == {"num_warps": 2}


def _capture(tmp_path: Path) -> Path:
    def launch(problem, seconds):
        return {"problem": problem, "args": [{"name": "X", "kind": "tensor", "shape": [4],
                                              "stride": [1], "dtype": "float16"}],
                "meta": {"BLOCK": 4}, "num_warps": 4, "num_stages": 2, "calls": 2,
                "seconds": seconds, "bytes": 8, "grid": [1], "written": ["X"]}
    parts = [{"device": "cpu", "kernels": [
        {"name": "a", "launches": [launch({"X_0": 4}, 0.6), launch({"X_0": 8}, 0.005)]},
        {"name": "b", "launches": [launch({"X_0": 4}, 0.3)]}]},
        {"device": "cpu", "kernels": [{"name": "b", "launches": [launch({"X_0": 4}, 0.095)]}]}]
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(merge(parts, ["python", "p.py"], 2.0)))
    return path


def test_parts_merge_and_rows_rank_by_time(tmp_path):
    rows = capture_rows(_capture(tmp_path))
    assert [(r.kernel, r.calls, round(r.seconds, 3)) for r in rows] == [
        ("a", 2, 0.6), ("b", 4, 0.395), ("a", 2, 0.005)]
    assert round(sum(r.share for r in rows), 6) == 1.0
    assert rows[0].roof_seconds is None and rows[0].can_save_s == rows[0].seconds


def test_selection_by_top_and_share(tmp_path):
    path = _capture(tmp_path)
    groups = tune_groups(path, None, None)  # default: at least 1 % of the kernel time
    assert [(g.ref.rsplit(":", 1)[1], g.dtype, g.shapes) for g in groups] == [
        ("a", "fp16", ["X_0=4"]), ("b", "fp16", ["X_0=4"])]
    assert tune_groups(path, None, 0.0)[0].shapes == ["X_0=4", "X_0=8"]
    assert len(tune_groups(path, 1, None)) == 1
    with pytest.raises(UsageError, match="passes the selection"):
        tune_groups(path, None, 0.9)


def test_a_file_that_is_no_capture_is_one_line(tmp_path):
    (tmp_path / "x.json").write_text('{"schema": 1}')
    with pytest.raises(KernelError, match="is not a capture file"):
        load_capture(tmp_path / "x.json")


def _hostile(tmp_path: Path, **launch: object) -> Path:
    record = {"name": "k", "qualname": "system", "module": "os", "file": "",
              "identity": "jit:0", "launches": [{
                  "problem": {"X_0": 4}, "meta": {"BLOCK": 4}, "num_warps": 4,
                  "num_stages": 2, "calls": 1, "seconds": 1.0, "bytes": 8, "grid": [1],
                  "written": ["X"], "args": [{"name": "X", "kind": "tensor", "shape": [4],
                                              "stride": [1], "dtype": "float32"}],
                  **launch}]}
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"schema": 1, "kernels": [record]}))
    return path


def test_a_capture_naming_a_function_that_is_no_kernel_is_one_line(tmp_path):
    """A hand-written capture pointing at ``os.system``: refused before anything is called."""
    from tuner.kernels.captured_launch import captured_kernel

    spec = captured_kernel(_hostile(tmp_path), "k")
    with pytest.raises(KernelError, match=r"os\.system is not a Triton kernel"):
        spec.launch(spec.make_inputs({"X_0": 4}, "fp32", 0, "cpu"), {"X_0": 4}, {})


def test_a_capture_with_an_absurd_tensor_is_refused_at_the_entry(tmp_path):
    from tuner.kernels.captured_launch import captured_kernel

    huge = {"name": "X", "kind": "tensor", "shape": [1 << 20, 1 << 20], "stride": [1 << 20, 1],
            "dtype": "float32"}
    spec = captured_kernel(_hostile(tmp_path, args=[huge], problem={"X_0": 1 << 20,
                                                                    "X_1": 1 << 20}), "k")
    assert any("largest tensor" in e for e in spec.problem_errors(spec.example_problem))
