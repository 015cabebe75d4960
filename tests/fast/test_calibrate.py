"""The device calibration's matmul sizing: long enough to time, short enough to repeat."""

from __future__ import annotations

import math

from tuner.measure.calibrate import measure_ceilings
from tuner.measure.calibrate import sized_to_take


def test_a_product_is_sized_up_until_one_run_takes_long_enough():
    tried: list[int] = []

    def seconds_at(size: int) -> float:  # a dtype 1000 times slower than another
        tried.append(size)
        return size**3 * 1e-9

    assert sized_to_take(seconds_at, 128, 1024, 0.05) == 512  # 0.13 s at 512, 0.03 at 256
    assert tried == [128, 256, 512]
    assert sized_to_take(lambda size: size**3 * 1e-12, 128, 1024, 0.05) == 1024  # capped
    assert sized_to_take(lambda size: 10.0, 128, 1024, 0.05) == 128  # one slow run only


def test_cpu_ceilings_are_positive_and_say_each_dtypes_size():
    ceilings = measure_ceilings("cpu")
    assert ceilings["bandwidth_gbps"] > 0 and math.isfinite(ceilings["bandwidth_gbps"])
    assert set(ceilings["tflops"]) == {"fp32", "fp16", "bf16"}
    assert all(v > 0 and math.isfinite(v) for v in ceilings["tflops"].values())
    for name in ("fp32", "fp16", "bf16"):
        assert f"{name} " in ceilings["method"] and "^3" in ceilings["method"]
