"""libdevice math and float arguments on the Triton interpreter: faithful shims for what real
kernels use (``tanh``, ``rsqrt``, ``erf``, ``pow`` …; ``eps.to(tl.float32)``).

Under ``TRITON_INTERPRET=1`` the functions of ``triton.language.extra.libdevice`` are stubs that
return ``None`` (a compiled kernel gets the backend's libdevice instead), so a kernel that calls
``libdevice.tanh(x)`` — or ``tanh(x)`` after ``from triton.language.extra.libdevice import
tanh`` — fails on the CPU. ``install()`` gives each stub listed here a body computing the same
math with numpy in the argument's precision (the stub function objects are changed in place,
so every import style sees it). Functions not listed keep failing with the one-line
explanation of ``tuner.measure.interpreter_limits``.

A compiled kernel receives a Python ``float`` argument as an fp32 scalar (Triton specialises
it as ``fp32``), so ``eps.to(tl.float32)`` works there; the interpreter passes the raw Python
number, which has no ``.to``. ``install()`` also makes the interpreter pass it as an fp32
scalar tensor, as compiled code sees it. Only the interpreter is affected: a compiled kernel
never runs these Python bodies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_gamma = np.vectorize(math.gamma, otypes=[np.float64])


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C ``round``: halves away from zero (numpy rounds them to even)."""
    return np.asarray(np.sign(x) * np.floor(np.abs(x) + 0.5))


#: libdevice name → numpy function on float arrays (same shape, float result).
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "fast_tanhf": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "exp": np.exp, "fast_expf": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "exp10": lambda x: np.power(10.0, x), "fast_exp10f": lambda x: np.power(10.0, x),
    "log": np.log, "fast_logf": np.log, "log2": np.log2, "fast_log2f": np.log2,
    "log10": np.log10, "fast_log10f": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "rsqrt_rn": lambda x: 1.0 / np.sqrt(x), "rcp_rn": lambda x: 1.0 / x,
    "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "sin": np.sin, "fast_sinf": np.sin, "cos": np.cos, "fast_cosf": np.cos,
    "tan": np.tan, "fast_tanf": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round_half_away, "abs": np.abs,
    "saturatef": lambda x: np.clip(x, 0.0, 1.0),
    "erf": _erf, "erfc": _erfc, "lgamma": _lgamma, "tgamma": _gamma,
    "normcdf": lambda x: 0.5 * _erfc(-x / math.sqrt(2.0)),
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power, "fast_powf": np.power, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "fmod": np.fmod,
    "fdim": lambda x, y: np.maximum(x - y, 0.0), "div_rn": np.divide,
    "fast_dividef": np.divide, "add_rn": np.add, "sub_rn": np.subtract,
    "mul_rn": np.multiply, "nextafter": np.nextafter,
}
TERNARY: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "fma": lambda a, b, c: a * b + c, "fma_rn": lambda a, b, c: a * b + c,
}
_APPLY = "_tuner_interpreter_math"


def _apply(name: str, *args: Any) -> Any:
    """``name`` applied to interpreter tensors (or Python numbers) in the first tensor's
    precision; the result has the first tensor's type."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    tensors = [a for a in args if isinstance(a, tl.tensor)]
    first = next((t for t in tensors if t.type.is_block()), tensors[0])
    dtype = first.handle.data.dtype
    arrays = [a.handle.data.astype(dtype) if isinstance(a, tl.tensor)
              else np.asarray(a, dtype=dtype) for a in args]  # a Python number
    tables: dict[str, Callable[..., np.ndarray]] = {**UNARY, **BINARY, **TERNARY}
    out = np.asarray(tables[name](*arrays)).astype(dtype)
    return tl.tensor(TensorHandle(out, first.handle.dtype.scalar), first.type)


def _float_arguments_as_fp32() -> None:
    """The interpreter's argument conversion, with Python floats as fp32 scalars."""
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._implicit_cvt
    if getattr(convert, "_tuner_fp32", False):
        return

    def as_compiled(arg: Any) -> Any:
        if isinstance(arg, float):
            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return convert(arg)

    as_compiled._tuner_fp32 = True  # type: ignore[attr-defined]
    interpreter._implicit_cvt = as_compiled


def install() -> list[str]:
    """Give the libdevice stubs their numpy bodies and float arguments their compiled type
    (idempotent); the libdevice names it gave."""
    from triton.language.extra import libdevice

    _float_arguments_as_fp32()
    namespace = vars(libdevice)
    namespace[_APPLY] = _apply
    given = []
    for table in (UNARY, BINARY, TERNARY):
        for name in table:
            stub = namespace.get(name)
            if stub is None or not callable(stub) or not hasattr(stub, "__code__"):
                continue
            params = list(stub.__code__.co_varnames[:stub.__code__.co_argcount])
            source = (f"def {name}({', '.join(params)}):\n"
                      f"    return {_APPLY}({name!r}, {', '.join(params)})\n")
            scope: dict[str, Any] = {}
            exec(source, scope)
            stub.__code__ = scope[name].__code__
            given.append(name)
    return given
