"""Static checks: compile a config for a GPU target on a machine without that GPU.

Runs inside a bench process started to compile for a device kind (``--compile-for``). A
compile-only Triton driver reports the target (e.g. ``sm_90``) and every launch of a
``@triton.jit`` kernel becomes a compile without a launch, on tensors that live on PyTorch's
``meta`` device (no data). From the compiled kernel come its dynamic shared memory and,
through ``cuobjdump --dump-resource-usage`` on the cubin, its registers per thread and its stack
(local memory: spills).

A config is rejected when it needs more shared memory than the target allows per block
(``out_of_resources``: it cannot launch) or when ptxas had to spill (``spills``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

from tuner.core.devices.datasheets import device_spec
from tuner.core.types import BenchmarkRequest
from tuner.core.types import StaticResult
from tuner.kernels import KernelSpec
from tuner.kernels import load_kernel
from tuner.measure.compile_watch import watch_compiles

_RESOURCE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


class CompileOnlyDriver:
    """The parts of a Triton driver that compiling needs, for a target this host lacks."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> torch.device:
        return torch.device("meta")


def cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def resource_usage(cubin: bytes) -> dict[str, int]:
    """Registers, stack, static shared and local memory of a cubin's kernel (bytes)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([cuobjdump(), "--dump-resource-usage", f.name], capture_output=True,
                             text=True, timeout=60, check=True).stdout
    finally:
        os.unlink(f.name)
    match = _RESOURCE.search(out)
    if match is None:
        raise RuntimeError(f"cannot read the resource usage: {out[-300:]}")
    regs, stack, shared, local = (int(g) for g in match.groups())
    return {"regs": regs, "stack": stack, "static_shared": shared, "local": local}


@triton.jit
def _warm_up_kernel(x_ptr):  # type: ignore[no-untyped-def]
    tl.store(x_ptr, tl.load(x_ptr) + 1)


class CompileDevice:
    """Installs the compile-only driver and turns every Triton launch into a compile."""

    torch_device = "meta"

    def __init__(self, kind: str) -> None:
        spec = device_spec(kind)
        if spec is None:
            raise ValueError(f"no datasheet entry for {kind!r}: cannot compile for it")
        self.kind = kind
        self.limits = spec.limits()
        major, minor = spec.compute_capability
        self.target = GPUTarget("cuda", major * 10 + minor, 32)
        driver.set_active(CompileOnlyDriver(self.target))
        self.compiled: list[Any] = []
        self._inputs_key: tuple[Any, ...] | None = None
        self._inputs: dict[str, Any] = {}
        original = JITFunction.run

        def compile_only(fn: JITFunction, *args: Any, grid: Any, warmup: bool,
                         **kwargs: Any) -> Any:
            kernel = original(fn, *args, grid=grid, warmup=True, **kwargs)
            self.compiled.append(kernel)
            return kernel

        JITFunction.run = compile_only  # type: ignore[method-assign]
        self.warm_up()

    def warm_up(self) -> None:
        """Compile a one-line kernel once at start: a process's first compile pays for
        loading Triton's backend and tools (about a second), which no config should. A
        failure here is only a slower first config (the configs report their own errors)."""
        try:
            _warm_up_kernel[(1,)](torch.empty(1, device="meta"))
        except Exception as exc:
            print(f"compile warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        self.compiled.clear()

    def describe(self) -> dict[str, Any]:
        return {"device_name": f"compile-only {self.kind}", "device_kind": self.kind,
                "backend": "compile", "target": f"sm_{self.target.arch}",
                "triton": triton.__version__, "torch": torch.__version__}

    def _meta_inputs(self, kernel: KernelSpec, request: BenchmarkRequest) -> dict[str, Any]:
        """Inputs of the problem on the meta device (made once per problem: no data kept)."""
        key = (request.kernel, tuple(sorted(request.problem.items())), request.dtype)
        if self._inputs_key != key:
            cpu = kernel.make_inputs(request.problem, request.dtype, request.seed, "cpu")
            self._inputs = {k: torch.empty_like(v, device="meta") for k, v in cpu.items()}
            self._inputs_key = key
        return dict(self._inputs)

    def check(self, request: BenchmarkRequest, roots: tuple[Path, ...], *,
              inspect: bool = True) -> StaticResult:
        """Compile ``request`` for the target; ``inspect=False`` skips reading registers and
        spills from the cubin (a compile only, as a bench process's first call)."""
        start = time.perf_counter()
        target = f"sm_{self.target.arch}"
        try:
            kernel = load_kernel(request.kernel, roots)
            tensors = self._meta_inputs(kernel, request)
            self.compiled.clear()
            with watch_compiles() as count:
                kernel.launch(tensors, request.problem, request.params)
            if not self.compiled:
                return StaticResult(status="ok", target=target, error="no Triton launch seen",
                                    compile_s=time.perf_counter() - start,
                                    cache_hit=count.cache_hit)
            smem = max(int(k.metadata.shared) for k in self.compiled)
            if not inspect:
                over = self.limits.smem_per_block_bytes is not None and \
                    smem > self.limits.smem_per_block_bytes
                return StaticResult(status="out_of_resources" if over else "ok", target=target,
                                    smem_bytes=smem, compile_s=time.perf_counter() - start,
                                    cache_hit=count.cache_hit,
                                    error=f"needs {smem} B of shared memory" if over else None)
            usage = [resource_usage(k.asm["cubin"]) for k in self.compiled]
        except Exception as exc:
            from tuner.measure.bench import classify

            return StaticResult(status=str(classify(exc)), target=target,
                                error=f"{type(exc).__name__}: {exc}"[-2000:],
                                compile_s=time.perf_counter() - start)
        regs = max(u["regs"] for u in usage)
        spill = max(u["stack"] + u["local"] for u in usage)
        limit = self.limits.smem_per_block_bytes
        status, error = "ok", None
        if limit is not None and smem > limit:
            status = "out_of_resources"
            error = f"needs {smem} B of shared memory per block; {self.kind} allows {limit} B"
        elif spill > 0:
            status = "spills"
            error = f"ptxas spills: {spill} B of stack/local memory per thread at {regs} registers"
        return StaticResult(status=status, target=target, regs=regs, spill_bytes=spill,
                            smem_bytes=smem, smem_limit=limit, error=error,
                            compile_s=time.perf_counter() - start, cache_hit=count.cache_hit)
