"""Fused-MoE best configs as vLLM/SGLang config files (``tuner.serving.vllm_moe``), and the
built-in kernel's routing alignment."""

from __future__ import annotations

import json

import pytest
import torch

from tuner.kernels.moe import align_block_size
from tuner.serving.vllm_moe import config_files
from tuner.serving.vllm_moe import write_config_files


def _entry(m, dtype="fp16", k=128, topk=2, device="NVIDIA H100 80GB HBM3", block_m=16):
    return {"kernel": "fused_moe", "problem": {"M": m, "E": 8, "N": 256, "K": k, "topk": topk},
            "dtype": dtype, "device_kind": "h100-sxm", "fingerprint": {"device_name": device},
            "config": {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128,
                       "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}}


def test_one_file_per_shape_and_gpu_keyed_by_m_in_order():
    doc = {"configs": [_entry(64, block_m=64), _entry(1), _entry(8, dtype="fp8e4m3"),
                       {"kernel": "matmul", "problem": {}, "config": {}}]}
    files = config_files(doc)
    assert set(files) == {"E=8,N=256,device_name=NVIDIA_H100_80GB_HBM3.json",
                          "E=8,N=256,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"}
    plain = files["E=8,N=256,device_name=NVIDIA_H100_80GB_HBM3.json"]
    assert list(plain) == ["1", "64"] and plain["64"]["BLOCK_SIZE_M"] == 64
    assert set(plain["1"]) == {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                               "num_warps", "num_stages"}


def test_two_shapes_for_one_file_and_m_are_refused():
    with pytest.raises(ValueError, match="M=1 was tuned for K, topk"):
        config_files({"configs": [_entry(1, k=128), _entry(1, k=256)]})


def test_files_are_written_as_the_libraries_read_them(tmp_path):
    written = write_config_files({"configs": [_entry(4)]}, tmp_path / "configs")
    assert [p.name for p in written] == ["E=8,N=256,device_name=NVIDIA_H100_80GB_HBM3.json"]
    assert json.loads(written[0].read_text())["4"]["BLOCK_SIZE_K"] == 128


def test_routing_is_aligned_to_the_block_size_per_expert():
    ids = torch.tensor([[0, 2], [2, 1], [0, 2]])
    sorted_ids, experts, padded = align_block_size(ids, 4, 3)
    invalid = ids.numel()
    assert sorted_ids.tolist() == [0, 4, invalid, invalid, 3, invalid, invalid, invalid,
                                   1, 2, 5, invalid]
    assert experts.tolist() == [0, 1, 2] and padded.tolist() == [12]
