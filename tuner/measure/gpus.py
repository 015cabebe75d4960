"""Which GPU each local bench process times on: one timer per GPU, never two.

``tuner tune --backend cuda --parallel N`` starts N bench processes. Two timers on one GPU
corrupt each other's timings, so they are spread one per GPU (``cuda:0 … cuda:N-1``, or the
GPUs ``--devices 0,2,5`` names) and ``N`` above the host's GPUs is refused with one line.
``cuda:<i>`` names one GPU: with ``--parallel`` above 1 it is refused too. Compile processes
(builders) time nothing and are not counted.

Indices are *logical*, as CUDA numbers the GPUs this process sees: when the service itself runs
under ``CUDA_VISIBLE_DEVICES=2,5``, ``cuda:1`` is physical GPU 5, and ``physical_gpu`` gives
the entry a bench process pins with its own ``CUDA_VISIBLE_DEVICES``.

GPUs are counted without importing torch: the entries of ``CUDA_VISIBLE_DEVICES`` when it is
set, else NVML's device count (``nvidia-ml-py``); ``None`` when neither can say.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from collections.abc import Sequence

from tuner.core.parsing import UsageError
from tuner.core.target import as_target


def _visible_entries(env: Mapping[str, str]) -> list[str] | None:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    return [entry.strip() for entry in visible.split(",") if entry.strip()]


def gpu_count(env: Mapping[str, str] | None = None) -> int | None:
    """How many GPUs this process sees (``None``: unknown, NVML unavailable)."""
    env = os.environ if env is None else env
    entries = _visible_entries(env)
    if entries is not None:
        return len(entries)
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def physical_gpu(index: int, env: Mapping[str, str] | None = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` entry that makes logical GPU ``index`` a child's GPU 0."""
    env = os.environ if env is None else env
    entries = _visible_entries(env)
    if entries is None:
        return str(index)
    if not 0 <= index < len(entries):
        raise UsageError(f"cuda:{index} is not visible: CUDA_VISIBLE_DEVICES="
                         f"{env.get('CUDA_VISIBLE_DEVICES', '')!r} shows {len(entries)} GPU(s)")
    return entries[index]


def parse_devices(text: str) -> tuple[int, ...]:
    """``"0,2,5"`` → ``(0, 2, 5)``; ``UsageError`` for anything else, or a GPU named twice."""
    parts = [part.strip() for part in text.split(",")]
    if not parts or not all(part.isdigit() and len(part) <= 4 for part in parts):
        raise UsageError(f"--devices {text!r}: expected GPU indices such as 0,2,5")
    devices = tuple(int(part) for part in parts)
    if len(set(devices)) != len(devices):
        raise UsageError(f"--devices {text!r} names a GPU twice: two timers on one GPU "
                         "would corrupt each other's timings")
    return devices


def bench_backends(backend: str, parallel: int, devices: Sequence[int] = (),
                   env: Mapping[str, str] | None = None) -> list[str]:
    """The backend name of each of the ``parallel`` local bench processes (``devices``: the
    GPUs ``--devices`` named, one process each). ``UsageError`` when that would put two timers
    on one GPU, or name a GPU this process cannot see."""
    target = as_target(backend)
    if not target.is_cuda:
        if devices:
            raise UsageError("--devices names GPUs: it applies to --backend cuda only")
        return [backend] * parallel
    if target.gpu_index is not None:
        if devices:
            raise UsageError(f"--backend {backend} names one GPU; use --backend cuda with "
                             "--devices")
        if parallel > 1:
            raise UsageError(f"--backend {backend} is one GPU: --parallel {parallel} would put "
                             f"{parallel} timers on it; use --backend cuda --parallel "
                             f"{parallel} to spread them over the GPUs")
        return [backend]
    count = gpu_count(env)
    if devices:
        if parallel not in (1, len(devices)):
            raise UsageError(f"--parallel {parallel} and --devices "
                             f"{','.join(map(str, devices))} disagree: one bench process "
                             "runs per GPU named")
        unseen = [d for d in devices if count is not None and d >= count]
        if unseen and count is not None:
            raise UsageError(f"--devices: GPU {unseen[0]} is not visible; this host shows "
                             f"{count} GPU(s) (cuda:0…cuda:{max(count - 1, 0)})")
        return [f"cuda:{d}" for d in devices]
    if parallel == 1:
        return ["cuda"]  # the default GPU, as before
    if count is None:
        raise UsageError(f"--parallel {parallel} on --backend cuda: this host's GPUs cannot be "
                         "counted (no NVML, CUDA_VISIBLE_DEVICES unset); name them with "
                         "--devices 0,1,…")
    if parallel > count:
        raise UsageError(f"--parallel {parallel} needs {parallel} GPUs (one timer per GPU); "
                         f"this host shows {count}: lower --parallel to {max(count, 1)}")
    return [f"cuda:{i}" for i in range(parallel)]
