"""``python -m tuner.kernels.describe REF [--kernel-root DIR …] [--problems JSON]``: import a
user's kernel file in a sandboxed child and print what the service needs to know about it as
one JSON line (``tuner.kernels.isolated`` starts it; nothing else should).

Output: ``{"name", "description", "dims", "dtypes", "space", "constraint_docs", "output",
"tolerance", "example_problem", "max_dim", "source_hash", "checks_problems",
"problem_errors"}`` or
``{"error": "..."}``. Anything the module prints goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def _space_errors(kernel: Any, problem: dict[str, Any]) -> list[str]:
    """The module's own constraints apply only here: say if they leave no config at all."""
    from search_spaces import Context
    from tuner.core.devices.datasheets import CPU_KIND
    from tuner.core.devices.datasheets import DEVICES
    from tuner.core.devices.datasheets import target_limits

    canonical = kernel.canonical_problem(problem)
    for dtype in kernel.dtypes:
        for kind in (CPU_KIND, *DEVICES):
            ctx = Context(problem=canonical, dtype=dtype, target=target_limits(kind))
            if kernel.space.default_config(ctx) is not None:
                return []
    return [f"the search space of {kernel.name} has no valid config for this problem"]


def describe(ref: str, roots: tuple[Path, ...], problems: list[dict[str, Any]]) -> dict[str, Any]:
    from search_spaces.constraints import registered
    from tuner.kernels.registry import KernelError
    from tuner.kernels.registry import load_kernel

    try:
        kernel = load_kernel(ref, roots)
        docs = registered()
        return {
            "name": kernel.name, "description": kernel.description, "dims": list(kernel.dims),
            "dtypes": list(kernel.dtypes), "space": kernel.space.to_json(),
            "constraint_docs": {c.name: docs.get(c.name, c.name)
                                for c in kernel.space.constraints},
            "output": kernel.output, "tolerance": dict(kernel.tolerance),
            "example_problem": dict(kernel.example_problem), "max_dim": kernel.max_dim,
            "source_hash": kernel.source_hash(), "identity": kernel.identity,
            "checks_problems": kernel.problem_check is not None
            or kernel.tensor_elements is not None,
            "problem_errors": [kernel.problem_errors(p) or _space_errors(kernel, p)
                               for p in problems],
        }
    except KernelError as exc:
        return {"error": str(exc)}
    except (Exception, SystemExit) as exc:  # user code: any failure is the user's to read
        return {"error": f"{ref}: {type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    from tuner.core.isolation import enter_sandbox
    from tuner.core.sandbox import confine
    from tuner.core.sandbox import die_with_starter

    try:
        enter_sandbox()
    except OSError as exc:
        print(json.dumps({"error": f"cannot enter the sandbox: {exc}"}), flush=True)
        return 2
    die_with_starter()
    confine()
    parser = argparse.ArgumentParser(prog="tuner.kernels.describe")
    parser.add_argument("ref")
    parser.add_argument("--kernel-root", type=Path, action="append", default=[])
    parser.add_argument("--problems", default="[]")
    args = parser.parse_args(argv)
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    result = describe(args.ref, tuple(args.kernel_root), json.loads(args.problems))
    proto.write(json.dumps(result) + "\n")
    proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
