"""Which kernel a stored result belongs to: an identity that a chosen name cannot fake.

Best configs are keyed by the kernel's name *and* its identity, so a file kernel that calls
itself ``matmul`` is stored beside the built-in, never over it, and two same-named kernels in
different files keep separate entries:

* ``builtin``: a kernel of this service (``tuner.kernels.names.BUILTIN``, the ``matmul+…``
  family, recorded spaces): only the service's code can be stored under it;
* ``jit:<hash>``: a Triton kernel (a bring-your-own kernel by convention, or what
  ``tuner.autotune`` decorates): SHA-256 of the kernel function's source and of every
  ``@triton.jit`` function it calls, by name, recursively. Whitespace around the function and
  its line in the file do not count, nor anything else in the file, so replacing
  ``@triton.autotune`` by ``@tuner.autotune`` keeps the identity; editing the kernel changes it;
* ``file:<hash>``: a ``KernelSpec`` in a user's file, whose code is the whole file (its hash).

Imports nothing heavy: production code computes ``jit_identity`` of its own kernel to look up
its tuned configs (``tuner.autotune``).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import textwrap
from typing import Any

BUILTIN = "builtin"


def unwrap(kernel: Any) -> Any:
    """The ``@triton.jit`` function under autotuners and heuristics (``.fn`` chains); under
    the interpreter (``TRITON_INTERPRET=1``), where ``@triton.jit`` gives an
    ``InterpretedFunction`` without ``src``, the plain Python function beneath it."""
    while not hasattr(kernel, "src") and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return kernel


def _source(fn: Any) -> str | None:
    """The kernel's source from its ``def`` line on (decorators dropped, as Triton's own
    ``JITFunction.src``), so compiled and interpreted runs give one identity; ``None`` when
    ``fn`` is neither a Triton function nor a Python function with a source file."""
    if hasattr(fn, "src"):
        return textwrap.dedent(str(fn.src)).strip()
    if not inspect.isfunction(fn):
        return None
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    start = re.search(r"^def\s+\w+\s*\(", text, re.MULTILINE)
    return (text[start.start():] if start else text).strip()


def _is_jit(value: Any) -> bool:
    """A ``@triton.jit`` function, compiled (``src``) or interpreted (``fn`` + ``run``)."""
    return hasattr(value, "fn") and (hasattr(value, "src") or hasattr(value, "run"))


def _called_jit_functions(jit: Any, source: str) -> list[tuple[str, Any]]:
    """``@triton.jit`` functions the kernel's source names, from its module's globals."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    scope = getattr(jit, "__globals__", None) or getattr(getattr(jit, "fn", None),
                                                         "__globals__", {})
    found = []
    for name in sorted(names):
        value = scope.get(name)
        if value is not None and value is not jit and _is_jit(value):
            found.append((name, unwrap(value)))
    return found


def jit_identity(kernel: Any) -> str:
    """``jit:<hash>`` of a Triton kernel (see the module docstring); ``ValueError`` for an
    object that is not one."""
    root = unwrap(kernel)
    if _source(root) is None:
        raise ValueError(f"{type(kernel).__name__} is not a Triton kernel")
    digest = hashlib.sha256()
    seen: set[int] = set()
    todo: list[tuple[str, Any]] = [(str(getattr(root, "__name__", "kernel")), root)]
    while todo:
        name, fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        source = _source(fn) or ""
        digest.update(name.encode() + b"\0" + source.encode() + b"\0")
        todo.extend(_called_jit_functions(fn, source))
    return f"jit:{digest.hexdigest()[:32]}"


def file_identity(source_hash: str) -> str:
    return f"file:{source_hash[:32]}"
