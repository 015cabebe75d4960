"""What this machine has: its NVIDIA GPUs, asked of ``nvidia-smi`` (never by initialising
CUDA in this process: the bench processes own the devices)."""

from __future__ import annotations

import shutil
import subprocess

from tuner.core.devices.datasheets import normalise_device_name


def local_gpu_names() -> list[str]:
    """The names of the GPUs ``nvidia-smi`` lists (empty without one, or without the tool)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def gpu_visible() -> bool:
    """True when ``nvidia-smi`` lists a GPU."""
    return bool(local_gpu_names())


def local_gpu_kinds() -> set[str]:
    """The device kinds of the local GPUs (``h100-sxm``, …)."""
    return {normalise_device_name(name) for name in local_gpu_names()}
