"""What this process would launch a kernel on, found without importing torch or Triton.

Production lookups (``tuner.serving.lookup``) serve configs tuned on the device kind the caller
will
launch on; with no ``device_kind`` given, that is this process's device:

1. ``TUNER_DEVICE_KIND`` when set (e.g. a service that launches on a GPU it has not touched yet);
2. torch's current CUDA device when torch is already imported and sees one;
3. the first GPU that ``CUDA_VISIBLE_DEVICES`` leaves visible, through NVML (``nvidia-ml-py``);
4. ``cpu`` (the Triton interpreter) when none of these finds a GPU.

``device_is_known()`` says whether that answer is certain: a ``cpu`` found only because torch
was not imported yet and NVML does not load may be a GPU host after all, unless torch is a CPU
build or the host has no GPU driver.

Each answer is computed once per process. ``local_facts`` gives the same device's driver
version and compute capability, and the CUDA version of the installed torch, for staleness.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import sys
from functools import cache
from typing import Any

from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import normalise_device_name


def _torch_device() -> tuple[str, str] | None:
    """(name, "major.minor") of torch's current CUDA device, if torch is imported and has one."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return str(torch.cuda.get_device_name(index)), f"{major}.{minor}"
    except Exception:  # a broken CUDA setup is "no GPU" here, never an error
        return None


def _nvml_device() -> tuple[str, str, str] | None:
    """(name, "major.minor", driver) of the first visible GPU through NVML, or None."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return None  # CUDA_VISIBLE_DEVICES="" hides every GPU
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        first = (visible or "0").split(",")[0].strip()
        if first.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(first))
        else:
            handle = pynvml.nvmlDeviceGetHandleByUUID(first)
        name = pynvml.nvmlDeviceGetName(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        driver = pynvml.nvmlSystemGetDriverVersion()
        return _text(name), f"{major}.{minor}", _text(driver)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@cache
def _detect() -> tuple[str, bool]:
    if os.environ.get("TUNER_DEVICE_KIND"):
        return os.environ["TUNER_DEVICE_KIND"], True
    found = _torch_device() or _nvml_device()
    if found is not None:
        return normalise_device_name(found[0]), True
    return CPU_KIND, "torch" in sys.modules or _nvml_loads() or _no_gpu_possible()


def _no_gpu_possible() -> bool:
    """Whether nothing here could launch on a GPU: torch is a CPU build, or the host has no
    GPU driver at all (no NVIDIA control device, no AMD ``/dev/kfd``)."""
    try:
        if importlib.metadata.version("torch").endswith("+cpu"):
            return True
    except importlib.metadata.PackageNotFoundError:
        pass
    return not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd"))


def _nvml_loads() -> bool:
    """Whether NVML itself loads (then "no GPU found" is an answer, not a guess)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def local_device_kind() -> str:
    """The device kind this process launches on (see the module docstring)."""
    return _detect()[0]


def device_is_known() -> bool:
    """Whether ``local_device_kind()`` found the device rather than guessed ``cpu``."""
    return _detect()[1]


def _torch_cuda_version() -> str | None:
    """The CUDA version torch was built for, from its metadata (``2.11.0+cu128`` → ``12.8``)."""
    torch: Any = sys.modules.get("torch")
    if torch is not None:
        return getattr(torch.version, "cuda", None)
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    match = re.search(r"\+cu(\d+)(\d)$", version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


@cache
def local_facts() -> dict[str, str | None]:
    """Versions and properties of this process's device that a stored config depends on:
    ``cuda`` (torch's build), ``driver`` and ``compute_capability`` (None where unknown)."""
    facts: dict[str, str | None] = {"cuda": _torch_cuda_version(), "driver": None,
                                     "compute_capability": None}
    torch_dev = _torch_device()
    nvml = _nvml_device()
    if torch_dev is not None:
        facts["compute_capability"] = torch_dev[1]
    if nvml is not None:
        facts["compute_capability"] = facts["compute_capability"] or nvml[1]
        facts["driver"] = nvml[2]
    return facts


def clear() -> None:
    """Forget the cached answers (tests, or after CUDA_VISIBLE_DEVICES changed)."""
    _detect.cache_clear()
    local_facts.cache_clear()
