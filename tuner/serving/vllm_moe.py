"""Best configs of the built-in ``fused_moe`` kernel as vLLM's / SGLang's fused-MoE config
files: one JSON file per (E, N, dtype, device) named ``E=<E>,N=<N>,device_name=<GPU>.json``
(``,dtype=fp8_w8a8`` for fp8 weights), mapping each batch size ``M`` to its meta-parameters
(``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``num_stages``).

``<GPU>`` is the measured device's name as CUDA reports it with spaces as underscores
(``NVIDIA_H100_80GB_HBM3``), as the libraries look it up. ``N`` is the problem's ``N``, the
GEMM's output columns per expert: vLLM names the files of its fused gate-up projection by the
intermediate size, half of the GEMM's ``N`` — tune with ``N`` = 2 × the intermediate size and
rename, or tune the GEMM you serve.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KERNEL = "fused_moe"
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
        "num_stages")


def file_name(problem: Mapping[str, int], dtype: str, device_name: str) -> str:
    """vLLM's file name for this (E, N, dtype) on ``device_name``."""
    suffix = ",dtype=fp8_w8a8" if dtype.startswith("fp8") else ""
    return f"E={problem['E']},N={problem['N']},device_name={device_name.replace(' ', '_')}" \
        f"{suffix}.json"


def config_files(document: Mapping[str, Any]) -> dict[str, dict[str, dict[str, int]]]:
    """File name → ``{str(M): config}`` for the ``fused_moe`` entries of an export document
    (``ValueError`` when two entries of one file give one ``M`` different ``K`` or
    ``topk``: a file cannot tell them apart)."""
    files: dict[str, dict[str, dict[str, int]]] = {}
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for entry in document["configs"]:
        if entry["kernel"] != KERNEL:
            continue
        problem = entry["problem"]
        device = (entry.get("fingerprint") or {}).get("device_name") or entry["device_kind"]
        name = file_name(problem, entry["dtype"], device)
        m = str(problem["M"])
        shape = (problem["K"], problem["topk"])
        if seen.setdefault((name, m), shape) != shape:
            raise ValueError(f"{name}: M={m} was tuned for K, topk = {seen[(name, m)]} and "
                             f"{shape}; export one of them (--kernel, or its own database)")
        files.setdefault(name, {})[m] = {k: int(entry["config"][k]) for k in KEYS}
    return {name: dict(sorted(by_m.items(), key=lambda kv: int(kv[0])))
            for name, by_m in files.items()}


def write_config_files(document: Mapping[str, Any], folder: Path) -> list[Path]:
    """Write the files into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in config_files(document).items():
        path = folder / name
        path.write_text(json.dumps(content, indent=4) + "\n")
        written.append(path)
    return written
