"""The names of the built-in kernels, where each is defined and its signature (dimensions,
dtypes): data only, so that the production read path (``tuner.serving.lookup``, ``tuner best``) can
check a question and find a kernel's source file without importing it (importing a kernel
imports torch and Triton). ``tests/fast/test_kernel_names.py`` holds the table to the
kernels' own specs.

Fused-epilogue names are ``matmul`` followed by any of, in this order: ``+bias``, one of
``+relu`` / ``+gelu`` / ``+silu``, ``+residual``."""

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
    "fused_moe": "tuner.kernels.moe:FUSED_MOE",
}
#: Families named by pattern (each name is a kernel of its own), as shown to users.
FAMILIES: dict[str, str] = {
    "matmul+[bias][+relu|+gelu|+silu][+residual]":
        "matmul with a fused epilogue, e.g. matmul+bias+gelu+residual",
}

#: Built-in kernel → (dimensions in declared order, dtypes).
SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "matmul": (("M", "N", "K"), ("fp32", "fp16", "bf16", "fp8e4m3")),
    "softmax": (("M", "N"), ("fp32", "fp16", "bf16")),
    "layernorm": (("M", "N"), ("fp32", "fp16", "bf16")),
    "rmsnorm": (("M", "N"), ("fp32", "fp16", "bf16")),
    "attention": (("Z", "H", "S", "D"), ("fp16", "bf16")),
    "attention_causal": (("Z", "H", "S", "D"), ("fp16", "bf16")),
    "linear+bias+gelu+residual+layernorm": (("M", "N", "K"), ("fp32", "fp16", "bf16")),
    "fused_moe": (("M", "E", "N", "K", "topk"), ("fp16", "bf16", "fp32")),
}
#: Activation name → the epilogue kernel's ``ACT`` code.
ACTIVATIONS: dict[str, int] = {"relu": 1, "gelu": 2, "silu": 3}
EPILOGUE_DTYPES = ("fp32", "fp16", "bf16")


def parse_epilogue(name: str) -> tuple[bool, str | None, bool] | None:
    """``matmul+bias+gelu+residual`` → (bias, activation, residual); None if not such a name."""
    parts = name.split("+")
    if parts[0] != "matmul" or len(parts) < 2:
        return None
    rest = parts[1:]
    bias = rest[:1] == ["bias"]
    rest = rest[bias:]
    act = rest[0] if rest and rest[0] in ACTIVATIONS else None
    rest = rest[act is not None:]
    residual = rest == ["residual"]
    if rest and not residual:
        return None
    return bias, act, residual


def builtin_signature(name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(dims, dtypes) of a built-in kernel name (a valid ``matmul+…`` name included), else
    None. Imports nothing."""
    if name in SIGNATURES:
        return SIGNATURES[name]
    if parse_epilogue(name) is not None:
        return ("M", "N", "K"), EPILOGUE_DTYPES
    return None


def builtin_space_hash(name: str) -> str | None:
    """The space hash of a built-in kernel (None for other names), from ``search_spaces``
    alone: neither torch nor Triton is imported."""
    if builtin_signature(name) is None:
        return None
    base = "matmul" if name.startswith("matmul+") else name
    if base == "matmul":
        from search_spaces.matmul import matmul_space

        return matmul_space().space_hash()
    if base in ("softmax", "layernorm", "rmsnorm"):
        from search_spaces.rowwise import rowwise_space

        return rowwise_space(base).space_hash()
    if base == "fused_moe":
        from search_spaces.moe import moe_space

        return moe_space().space_hash()
    if base.startswith("attention"):
        from search_spaces.attention import attention_space

        return attention_space(base).space_hash()
    from search_spaces.chain import chain_space

    return chain_space(base).space_hash()


def is_file_ref(ref: str) -> bool:
    """``path.py:NAME`` (a module) or ``capture.json:NAME`` (a kernel ``tuner capture``
    recorded)."""
    return ":" in ref and ref.rsplit(":", 1)[0].endswith((".py", ".json"))


def builtin_module(ref: str) -> str | None:
    """The module defining a built-in kernel (a ``matmul+…`` name: the epilogue module), or
    None for other references. Imports nothing."""
    if ref in BUILTIN:
        return BUILTIN[ref].split(":")[0]
    return "tuner.kernels.matmul_epilogue" if ref.startswith("matmul+") else None
