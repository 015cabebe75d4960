"""The names of the built-in kernels and where each is defined: data only, so that the
production read path (``tuner.lookup``) can find a kernel's source file without importing it
(importing a kernel imports torch and Triton)."""

from __future__ import annotations

#: Built-in kernels: name → "module:attribute".
BUILTIN: dict[str, str] = {
    "matmul": "tuner.kernels.matmul:MATMUL",
    "softmax": "tuner.kernels.rowwise:SOFTMAX",
    "layernorm": "tuner.kernels.rowwise:LAYERNORM",
    "rmsnorm": "tuner.kernels.rowwise:RMSNORM",
    "attention": "tuner.kernels.attention:ATTENTION",
    "attention_causal": "tuner.kernels.attention:ATTENTION_CAUSAL",
    "linear+bias+gelu+residual+layernorm": "tuner.kernels.chain:CHAIN",
}
#: Families named by pattern (each name is a kernel of its own), as shown to users.
FAMILIES: dict[str, str] = {
    "matmul+[bias][+relu|+gelu|+silu][+residual]":
        "matmul with a fused epilogue, e.g. matmul+bias+gelu+residual",
}


def is_file_ref(ref: str) -> bool:
    return ":" in ref and ref.split(":", 1)[0].endswith(".py")


def builtin_module(ref: str) -> str | None:
    """The module defining a built-in kernel (a ``matmul+…`` name: the epilogue module), or
    None for other references. Imports nothing."""
    if ref in BUILTIN:
        return BUILTIN[ref].split(":")[0]
    return "tuner.kernels.matmul_epilogue" if ref.startswith("matmul+") else None
