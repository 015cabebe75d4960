"""The backends and builders one worker can use: its device, plus what needs no GPU.

A GPU worker (device ``cuda:N``) runs every GPU trial of its queue on that GPU, whatever the
job's backend said (``cuda`` or ``cuda:M``: the queue picked the kind). Any worker runs static
checks, in a builder for the request's GPU kind (a pipelined worker's own compile pool for its
kind). A CPU worker runs the interpreter and replays. Backends and builders start lazily and
stay up; ``close`` stops their processes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from dataclasses import field

from tuner.core.settings import Settings
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder
from tuner.measure.backends.registry import make_backend
from tuner.measure.backends.subprocess_backend import CompileBuilder


@dataclass
class BackendPool:
    device: str  #: the backend of the device it owns (``interpret`` on a CPU worker)
    settings: Settings
    backends: dict[str, Backend] = field(default_factory=dict)
    #: Builders by GPU kind.
    builders: dict[str, Builder] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def key(self, request: BenchmarkRequest) -> str:
        worker_on_gpu = as_target(self.device).is_cuda
        if as_target(request.backend).is_cuda:
            if not worker_on_gpu:
                raise RuntimeError(f"a GPU trial reached the {self.device} worker")
            return self.device
        if worker_on_gpu:
            raise RuntimeError(f"a {request.backend} trial reached the GPU worker {self.device}")
        return request.backend

    def backend_for(self, request: BenchmarkRequest) -> Backend:
        key = self.key(request)
        s = self.settings
        with self._lock:  # a pipelined Celery worker asks from several threads
            backend = self.backends.get(key)
            if backend is None:
                backend = make_backend(key, cache_dir=s.cache_dir, kernel_roots=s.kernel_roots,
                                       memory_bytes=s.bench_memory_bytes)
                self.backends[key] = backend
        return backend

    def builder_for(self, request: BenchmarkRequest) -> Builder:
        """The builder for ``request.device_kind`` (``ValueError`` for a kind without a
        datasheet entry)."""
        kind = request.device_kind
        s = self.settings
        with self._lock:
            builder = self.builders.get(kind)
            if builder is None:
                builder = CompileBuilder(kind, cache_dir=s.cache_dir,
                                         kernel_roots=s.kernel_roots,
                                         memory_bytes=s.bench_memory_bytes)
                self.builders[kind] = builder
        return builder

    def close(self) -> None:
        with self._lock:
            for backend in self.backends.values():
                backend.close()
            for builder in self.builders.values():  # closing a pipelined one's pool again:
                builder.close()  # harmless
            self.backends.clear()
            self.builders.clear()
