"""Analytic time model of the matmul kernel on a datasheet GPU: a *prediction*, never a
measurement.

Starts from the roofline and charges what a tiled kernel loses against it:

* tile quantisation: padded tiles do work for nothing, ``M·N / (⌈M/BM⌉BM · ⌈N/BN⌉BN)``, and
  the K tail likewise;
* wave quantisation: ``T`` tiles on ``SMs × c`` resident CTAs run in ``⌈T / (SMs·c)⌉`` waves,
  ``c`` limited by shared memory, registers and warps per SM;
* the instruction: on Hopper a ``BLOCK_M ≥ 64`` tile with a multiple of 4 warps uses
  warpgroup MMA; otherwise ``mma.sync`` at half the rate (``docs/PERFORMANCE_FACTS.md`` §3);
* traffic: each A tile is read ``⌈N/BN⌉`` times and each B tile ``⌈M/BM⌉`` times from L2,
  assumed 3× HBM bandwidth;
* pipelining: one stage serialises loads and math, two overlap most, three or more fully;
* the K loop: each iteration costs ``LOOP_CYCLES`` of fixed overhead (barriers, addresses);
* spills (from a static check when there is one) slow the inner loop.

A config whose CTA cannot fit one SM's register file is predicted infinitely slow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from search_spaces import DTYPE_BYTES
from search_spaces.matmul import accumulator_regs_per_thread
from search_spaces.matmul import pipeline_smem_bytes
from tuner.core.devices.datasheets import DeviceSpec

L2_BANDWIDTH_FACTOR = 3.0
OVERLAP = {1: 0.0, 2: 0.6}
REGS_OVERHEAD = 40  # registers per thread beyond the accumulator: addresses, operands
MAX_CTAS_PER_SM = 32
MAX_WARPS_PER_SM = 64
REGISTER_FILE = 65536  # 32-bit registers per SM
LOOP_CYCLES = 200
CLOCK_HZ = 1.83e9  # the clock the tensor-core peaks assume (docs/PERFORMANCE_FACTS.md §2)


def resident_ctas(config: Mapping[str, Any], dtype: str, spec: DeviceSpec,
                  regs_per_thread: int | None = None) -> int:
    """CTAs one SM can hold at once for this config (0: not even one fits)."""
    warps = int(config["num_warps"])
    smem = pipeline_smem_bytes(config, DTYPE_BYTES[dtype])
    by_smem = (spec.smem_per_block_optin // smem) if smem else MAX_CTAS_PER_SM
    regs = regs_per_thread or min(255, int(accumulator_regs_per_thread(config)) + REGS_OVERHEAD)
    by_regs = REGISTER_FILE // max(1, regs * warps * 32)
    by_warps = MAX_WARPS_PER_SM // warps
    return max(0, min(by_smem, by_regs, by_warps, MAX_CTAS_PER_SM))


def predict_ms(problem: Mapping[str, int], dtype: str, config: Mapping[str, Any],
               spec: DeviceSpec, static: Mapping[str, Any] | None = None) -> float:
    """Predicted time of one call in milliseconds (see the module docstring)."""
    m, n, k = problem["M"], problem["N"], problem["K"]
    bm, bn, bk = int(config["BLOCK_M"]), int(config["BLOCK_N"]), int(config["BLOCK_K"])
    warps, stages = int(config["num_warps"]), int(config["num_stages"])
    elem = DTYPE_BYTES[dtype]
    tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
    tiles = tiles_m * tiles_n
    tile_eff = (m * n) / (tiles_m * bm * tiles_n * bn) * k / (math.ceil(k / bk) * bk)
    regs = (static or {}).get("regs")
    per_sm = resident_ctas(config, dtype, spec, regs)
    if per_sm == 0:
        return math.inf
    slots = spec.sm_count * per_sm
    waves = math.ceil(tiles / slots)
    wave_eff = tiles / (waves * slots)
    peak = spec.tflops["fp32" if dtype == "fp32" else dtype] * 1e12
    mma_eff = 1.0 if dtype == "fp32" or (bm >= 64 and warps % 4 == 0) else 0.5
    compute_ms = 2.0 * m * n * k / (peak * tile_eff * wave_eff * mma_eff) * 1e3
    dram = elem * (m * k + k * n + m * n)
    l2 = elem * (m * k * tiles_n + k * n * tiles_m)
    memory_ms = max(dram / (spec.bandwidth_gbps * 1e9),
                    l2 / (L2_BANDWIDTH_FACTOR * spec.bandwidth_gbps * 1e9)) * 1e3
    overlap = OVERLAP.get(stages, 0.95)
    loop_ms = waves * math.ceil(k / bk) * LOOP_CYCLES / CLOCK_HZ * 1e3
    time_ms = max(compute_ms, memory_ms) + (1.0 - overlap) * min(compute_ms, memory_ms) \
        + loop_ms
    spill = (static or {}).get("spill_bytes") or 0
    return time_ms * (1.0 + min(4.0, spill / 256.0))
