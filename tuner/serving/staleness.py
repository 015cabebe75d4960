"""Does a stored config still describe this process? Its fingerprint against what runs here.

A best config is stored with the fingerprint of everything that can change the answer
(``tuner.control.recording.fingerprint``): the kernel's source hash (and, since this release,
its file), the search space's hash, Triton, torch and CUDA versions, and the GPU's driver and
compute capability. ``stale_reasons`` lists every difference from this process:

* Triton and torch versions (package metadata; local version labels ignored) and torch's CUDA;
* driver and compute capability, when the config was tuned on the kind of device this process
  has (across kinds the lookup says so itself);
* the kernel's source: a built-in kernel's module file, or the file a bring-your-own kernel
  was tuned from, when it exists here;
* the search space's hash (built-in kernels; a user kernel's space lives in its file, which
  the source hash covers).

A value unknown on either side is not a difference. Reading a file and, for the space hash,
importing the built-in kernel (torch and Triton) happen only when staleness is asked for.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from tuner.core.devices.local import local_device_kind
from tuner.core.devices.local import local_facts


@cache
def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: Any) -> str:
    return str(version).split("+")[0]


def _builtin_file(kernel: str) -> Path | None:
    """The file whose hash the service stores for a built-in kernel (found, not imported)."""
    from tuner.kernels.names import builtin_module

    module = builtin_module(kernel)
    if module is None:
        return None
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec and spec.origin else None


@cache
def _file_hash(path: str) -> str | None:
    from search_spaces.canonical import stable_hash

    try:
        return stable_hash(Path(path).read_text())
    except (OSError, UnicodeDecodeError):
        return None


@cache
def _builtin_space_hash(kernel: str) -> str | None:
    from tuner.kernels.names import builtin_space_hash

    try:
        return builtin_space_hash(kernel)
    except Exception:  # a space that cannot be built cannot say; the source hash still can
        return None


def _differs(stored: Any, here: Any) -> bool:
    return stored not in (None, "") and here not in (None, "") and str(stored) != str(here)


def stale_reasons(kernel: str, device_kind: str | None, fingerprint: Mapping[str, Any],
                  by_source: bool = True) -> list[str]:
    """Why a config of ``kernel`` tuned on ``device_kind`` with ``fingerprint`` may no longer
    be right in this process (empty: nothing differs). ``by_source=False``: the file's hash
    says nothing (a Triton kernel's identity covers its own source, ``tuner.serving.lookup``)."""
    reasons = []
    for package in ("triton", "torch"):
        stored, here = fingerprint.get(package), _version(package)
        if _differs(stored and _release(stored), here and _release(here)):
            reasons.append(f"{package} {stored} → {here}")
    facts = local_facts()
    if _differs(fingerprint.get("cuda"), facts["cuda"]):
        reasons.append(f"CUDA {fingerprint['cuda']} → {facts['cuda']}")
    if device_kind is not None and device_kind == local_device_kind():
        for key, label in (("driver", "driver"), ("compute_capability", "compute capability")):
            if _differs(fingerprint.get(key), facts[key]):
                reasons.append(f"{label} {fingerprint[key]} → {facts[key]}")
    stored_source = fingerprint.get("kernel_source_hash")
    path = fingerprint.get("kernel_file") or _builtin_file(kernel)
    if by_source and stored_source and path is not None and Path(path).is_file() \
            and _file_hash(str(path)) != stored_source:
        reasons.append(f"kernel source {Path(path).name} changed")
    if fingerprint.get("space_hash") and \
            _differs(fingerprint.get("space_hash"), _builtin_space_hash(kernel)):
        reasons.append("search space changed")
    return reasons


def clear() -> None:
    for fn in (_version, _file_hash, _builtin_space_hash):
        fn.cache_clear()
