"""Find a kernel spec by reference: a built-in name or ``path/to/module.py:NAME``.

Built-ins are imported lazily (importing a kernel imports torch and Triton). A user module is
loaded only from under one of the allowed roots (``Settings.kernel_roots``): it is arbitrary
code and runs with the privileges of the process that loads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tuner.core.target import Target
from tuner.core.target import as_target
from tuner.kernels.convention import is_autotuned
from tuner.kernels.convention import spec_from_module
from tuner.kernels.identity import BUILTIN as BUILTIN_IDENTITY
from tuner.kernels.identity import file_identity
from tuner.kernels.names import BUILTIN
from tuner.kernels.names import FAMILIES
from tuner.kernels.names import builtin_module
from tuner.kernels.names import is_file_ref
from tuner.kernels.spec import KernelError
from tuner.kernels.spec import KernelSpec

__all__ = ["BUILTIN", "FAMILIES", "KernelError", "builtin_module", "is_file_ref",
           "load_kernel", "resolve_kernel"]

def load_kernel(ref: str, roots: Sequence[Path] = ()) -> KernelSpec:
    """Resolve ``ref`` to a ``KernelSpec``.

    Raises ``KernelError`` with a one-line reason for an unknown name, a path outside ``roots``,
    a module that fails to import, or an attribute that is not a ``KernelSpec``.
    """
    if ref in BUILTIN:
        module_name, attr = BUILTIN[ref].split(":")
        spec = getattr(importlib.import_module(module_name), attr)
    elif ref.startswith("matmul+"):
        from tuner.kernels.matmul_epilogue import epilogue_kernel

        try:
            spec = epilogue_kernel(ref)
        except ValueError as exc:
            raise KernelError(str(exc)) from None
    elif is_file_ref(ref):
        spec = _load_file_kernel(ref, roots)
    else:
        hint = " (a recorded tuning space: tuner tune replay --backend replay:<file>)" \
            if ref == "replay" else ""
        raise KernelError(f"unknown kernel {ref!r}; built-in kernels: {', '.join(BUILTIN)} "
                          f"(or give path/to/module.py:NAME){hint}")
    if not isinstance(spec, KernelSpec):
        raise KernelError(f"{ref!r} is a {type(spec).__name__}, not a KernelSpec")
    if not is_file_ref(ref):
        return dataclasses.replace(spec, identity=BUILTIN_IDENTITY)
    if spec.identity is None or spec.identity == BUILTIN_IDENTITY:  # a file cannot be built in
        return dataclasses.replace(spec, identity=file_identity(spec.source_hash()))
    return spec


#: Said when a kernel's files are out of this process's reach (it may be a sandbox user).
_SANDBOX_HINT = ("; kernel code runs as a user of its own where the service runs as root "
                 "(README, Security): make the kernel's folder and files readable by others "
                 "(chmod o+rx on folders, o+r on files), or set TUNER_SANDBOX=off")


#: Said when a neighbour import fails in a folder this process may not list.
_UNLISTABLE_HINT = ("; if that module is beside the kernel: its folder is not listable by the "
                    "user the kernel runs as (chmod o+rx it, or TUNER_SANDBOX=off)")


def _check_root(ref: str, roots: Sequence[Path]) -> Path:
    """The file of ``path.py:NAME``; ``KernelError`` unless it exists inside ``roots``."""
    given = ref.rsplit(":", 1)[0]
    shown = given if len(given) <= 120 else f"{given[:60]}…{given[-40:]} ({len(given)} chars)"
    try:
        path = Path(given).expanduser().resolve()
        inside = any(path.is_relative_to(root.resolve()) for root in roots)
        exists = inside and path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:  # too long, a loop, a NUL byte …
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise KernelError(f"kernel file {shown} cannot be used: {reason}"
                          + (_SANDBOX_HINT if isinstance(exc, PermissionError) else "")) from None
    if not inside:
        allowed = ", ".join(str(r) for r in roots) or "(none)"
        raise KernelError(f"{shown} is outside the allowed kernel roots ({allowed}); "
                          "set TUNER_KERNEL_ROOTS to allow it")
    if not exists:
        raise KernelError(f"kernel file {shown} does not exist")
    return path


def _load_file_kernel(ref: str, roots: Sequence[Path]) -> object:
    attr = ref.rsplit(":", 1)[1]
    path = _check_root(ref, roots)
    if path.suffix == ".json":
        from tuner.kernels.captured_launch import captured_kernel

        return captured_kernel(path, attr, roots)
    module_name = "tuner_user_kernel_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise KernelError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        if str(path.parent) not in sys.path:  # the module's own imports of its neighbours
            sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # user code: any failure is reported, not raised
            del sys.modules[module_name]
            hint = _UNLISTABLE_HINT if isinstance(exc, ImportError | PermissionError) and \
                not os.access(path.parent, os.R_OK) else ""
            raise KernelError(f"importing {path} failed: {type(exc).__name__}: {exc}"
                              + hint) from None
    if not hasattr(module, attr):
        raise KernelError(f"{path} has no attribute {attr!r}")
    found = getattr(module, attr)
    if isinstance(found, KernelSpec) or not (callable(found) or is_autotuned(found)):
        return found
    try:  # a launcher or an autotuned kernel, by convention (tuner.kernels.convention)
        return spec_from_module(module, path, attr)
    except KernelError:
        raise
    except Exception as exc:  # user code: any failure is reported, not raised
        raise KernelError(f"describing {path.name}:{attr} failed: "
                          f"{type(exc).__name__}: {exc}") from None


def resolve_kernel(ref: str, backend: str | Target, roots: Sequence[Path] = (), *,
                   isolated: bool = False) -> KernelSpec:
    """The kernel a job tunes: ``load_kernel(ref)``, or the recording of a ``replay:`` backend.

    For replay, ``ref`` must be ``replay``, ``recorded:<name>`` or the recorded kernel's name.
    ``isolated``: a user's kernel file is described by a sandboxed child instead of imported
    (``tuner.kernels.isolated``; what the scheduler and the CLI do).
    """
    from tuner.kernels.recorded import recorded_kernel

    path = as_target(backend).recording
    if isolated and is_file_ref(ref) and path is None:
        from tuner.kernels.isolated import isolated_kernel

        _check_root(ref, roots)
        return isolated_kernel(ref, roots)
    if path is None:
        return load_kernel(ref, roots)
    try:
        spec = recorded_kernel(path)
    except (OSError, ValueError) as exc:
        raise KernelError(f"cannot replay {path}: {exc}") from None
    recorded_name = spec.name.split(":", 1)[1]
    if ref not in ("replay", spec.name, recorded_name):
        raise KernelError(f"{path} records kernel {recorded_name!r}, not {ref!r} "
                          "(use 'replay' as the kernel name)")
    return spec
