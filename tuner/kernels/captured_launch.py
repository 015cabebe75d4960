"""A captured kernel as a ``KernelSpec`` (``captured_kernel``), launched again: inputs rebuilt
from the capture, the library's own launch as the reference, a config's launch with the
captured grid (the format: ``tuner.kernels.captured``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tuner.core.launch import LAUNCH_OPTIONS
from tuner.kernels.captured import derive_space
from tuner.kernels.captured import dtype_of
from tuner.kernels.captured import find_kernel
from tuner.kernels.captured import grid_key
from tuner.kernels.captured import import_kernel
from tuner.kernels.captured import load_capture
from tuner.kernels.captured import own_config
from tuner.kernels.convention import DEFAULT_TOLERANCE
from tuner.kernels.spec import ConfigRejected
from tuner.kernels.spec import KernelError
from tuner.kernels.spec import KernelSpec


def _tensor(arg: Mapping[str, Any], gen: torch.Generator, device: str) -> torch.Tensor:
    """A tensor like the captured one: kept values, or seeded values over its strides."""
    dtype = getattr(torch, arg["dtype"])
    shape, stride = tuple(arg["shape"]), tuple(arg["stride"])
    if "values" in arg:
        return torch.tensor(arg["values"], dtype=dtype).reshape(shape).to(device)
    size = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0
    if dtype.is_floating_point:
        base = torch.randn(size, generator=gen).to(dtype)
    elif dtype == torch.bool:
        base = torch.zeros(size, dtype=dtype)
    else:  # a large integer tensor: small values keep it a valid index in most kernels
        base = torch.randint(0, 2, (size,), generator=gen).to(dtype)
    return base.to(device).as_strided(shape, stride)


def _meta_value(value: Any) -> Any:
    """A captured meta-parameter as the kernel takes it (a Triton dtype rebuilt)."""
    if isinstance(value, dict) and "triton_dtype" in value:
        import triton.language as tl

        return tl.dtype(value["triton_dtype"])
    return value


class CapturedLaunches:
    """The launches of one captured kernel, as a ``KernelSpec``'s functions."""

    def __init__(self, kernel: Mapping[str, Any], roots: Sequence[Path] = ()) -> None:
        self.record = kernel
        self.roots = tuple(roots)
        self.by_problem = {json.dumps(launch["problem"], sort_keys=True): launch
                           for launch in kernel["launches"]}
        self._fn: Any = None

    def fn(self) -> Any:
        if self._fn is None:
            self._fn = import_kernel(self.record, self.roots)
        return self._fn

    def of(self, problem: Mapping[str, Any]) -> Mapping[str, Any]:
        found: Mapping[str, Any] | None = self.by_problem.get(
            json.dumps(dict(problem), sort_keys=True))
        if found is None:
            raise KernelError(f"{self.record['name']} was not captured with the problem "
                              f"{dict(problem)} (tune a problem of the capture)")
        return found

    def problem_check(self, problem: Mapping[str, Any]) -> list[str]:
        try:
            self.of(problem)
        except KernelError as exc:
            return [str(exc)]
        return []

    def make_inputs(self, problem: Mapping[str, Any], dtype: str, seed: int,
                    device: str) -> dict[str, Any]:
        """Every runtime argument in order: tensors rebuilt (seeded), scalars as captured."""
        gen = torch.Generator().manual_seed(seed)
        return {arg["name"]: _tensor(arg, gen, device) if arg["kind"] == "tensor"
                else arg.get("value") for arg in self.of(problem)["args"]}

    def _run(self, tensors: dict[str, Any], launch: Mapping[str, Any],
             config: Mapping[str, Any]) -> None:
        meta = {k: _meta_value(v) for k, v in launch["meta"].items()}
        meta.update({k: v for k, v in config.items() if k not in LAUNCH_OPTIONS})
        options = {k: config[k] for k in LAUNCH_OPTIONS if config.get(k) is not None}
        if launch.get("grid_table"):
            grid = launch["grid_table"].get(grid_key(meta))
            if grid is None:
                raise ConfigRejected("the launcher's grid was not captured for these block "
                                     "sizes")
        else:
            grid = launch["grid"]
        # by name: a constexpr may sit between runtime arguments in the signature
        self.fn()[tuple(grid)](**tensors, **meta, **options)

    def launch(self, tensors: dict[str, Any], problem: Mapping[str, Any],
               config: Mapping[str, Any]) -> None:
        self._run(tensors, self.of(problem), config)

    def reference(self, tensors: dict[str, Any], problem: Mapping[str, Any]) -> list[Any]:
        """The library's own launch on these inputs: every tensor it wrote."""
        launch = self.of(problem)
        self._run(tensors, launch, own_config(launch))
        return [tensors[name] for name in launch["written"]]

    def outputs(self, tensors: dict[str, Any]) -> list[Any]:
        first = self.record["launches"][0]
        names = first["written"]
        for launch in self.record["launches"]:
            if all(tensors.get(a["name"]) is not None and tuple(tensors[a["name"]].shape)
                   == tuple(a["shape"]) for a in launch["args"] if a["kind"] == "tensor"):
                names = launch["written"]
                break
        return [tensors[name] for name in names]

    def largest_tensor(self, problem: Mapping[str, Any]) -> int:
        """Elements of the largest tensor the problem's launch rebuilds (0 for an unknown
        problem: ``problem_check`` names it)."""
        launch = self.by_problem.get(json.dumps(dict(problem), sort_keys=True))
        sizes = [math.prod(a["shape"]) for a in (launch or {}).get("args", [])
                 if a["kind"] == "tensor"]
        return max(sizes, default=0)

    def min_bytes(self, problem: Mapping[str, Any], dtype: str) -> float:
        return float(self.of(problem).get("bytes", 0))


def captured_kernel(path: str | Path, name: str, roots: Sequence[Path] = ()) -> KernelSpec:
    """The spec of kernel ``name`` captured in ``path``; its problems are its launches; a
    program's own file it imports must lie under ``roots``."""
    doc = load_capture(path)
    kernel = find_kernel(doc, name, path)
    if not kernel.get("launches"):
        raise KernelError(f"{path}: {name} has no launch")
    launches = CapturedLaunches(kernel, roots)
    first = kernel["launches"][0]
    dims = tuple(first["problem"])
    return KernelSpec(
        name=name,
        description=f"{kernel['qualname']} from {kernel['module'] or kernel['file']} "
                    f"(captured, {len(kernel['launches'])} problem(s))",
        dims=dims,
        dtypes=tuple(dict.fromkeys(dtype_of(launch) for launch in kernel["launches"])),
        space=derive_space(kernel),
        make_inputs=launches.make_inputs,
        launch=launches.launch,
        reference=launches.reference,  # type: ignore[arg-type]  # one answer per output
        output=first["written"][0] if first["written"] else "",
        outputs=launches.outputs,
        flops=lambda problem, dtype: 0.0,
        min_bytes=launches.min_bytes,
        tolerance=DEFAULT_TOLERANCE,
        example_problem=dict(first["problem"]),
        tensor_elements=launches.largest_tensor,
        problem_check=launches.problem_check,
        known_source_hash=kernel["identity"].split(":", 1)[1],
        identity=kernel["identity"],
    )
