"""A user's kernel file seen from a process that holds credentials (the scheduler, the CLI):
described by a sandboxed child, never imported here (README, "Security").

``isolated_kernel(ref, roots)`` runs ``python -m tuner.kernels.describe`` with an allowlisted
environment (``tuner.core.sandbox``), a timeout and no inherited secret, and builds a
``KernelSpec`` from its JSON: the space, dims, dtypes, tolerances and source hash are the
module's own. What only the module's code can do stays in the bench processes: the functions
that make inputs, launch and check (here they raise ``KernelError``), and constraints the module
registered itself (deferred here: ``search_spaces.constraints.defer``; the bench process
applies them and answers ``invalid``). The module's ``problem_check`` runs in a sandboxed child
too, once per problem. Descriptions are cached per (file, modification time, roots).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from search_spaces import SearchSpace
from search_spaces.constraints import defer
from search_spaces.constraints import is_deferred
from search_spaces.constraints import registered
from tuner.core.isolation import open_sandbox
from tuner.core.isolation import remove_tenant
from tuner.core.isolation import run_sandboxed
from tuner.core.sandbox import sandbox_environment
from tuner.core.settings import Settings
from tuner.kernels.spec import KernelError
from tuner.kernels.spec import KernelSpec

#: Seconds a description may take (importing torch and Triton is most of it).
DESCRIBE_TIMEOUT_S = 180.0
#: Descriptions kept per process (a long-lived scheduler sees many problems).
MAX_CACHED = 512
_CALLS = itertools.count()
_CACHE: dict[tuple[str, float, tuple[str, ...], str], dict[str, Any]] = {}


def _describe(ref: str, roots: Sequence[Path], problems: Sequence[Mapping[str, Any]] = ()
              ) -> dict[str, Any]:
    path = Path(ref.rsplit(":", 1)[0]).expanduser()
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = -1.0
    problems_json = json.dumps([dict(p) for p in problems], sort_keys=True)
    key = (ref, mtime, tuple(str(r) for r in roots), problems_json)
    if key in _CACHE:
        return _CACHE[key]
    cmd = [sys.executable, "-m", "tuner.kernels.describe", ref, "--problems", problems_json]
    for root in roots:
        cmd += ["--kernel-root", str(root)]
    settings = Settings.from_env()
    memory, cache_dir = settings.bench_memory_bytes, settings.cache_dir
    tenant = f"describe-{os.getpid()}-{next(_CALLS)}"  # every description alone
    try:
        proc = run_sandboxed(cmd, sandbox_environment(), open_sandbox(tenant, cache_dir),
                             timeout_s=DESCRIBE_TIMEOUT_S, memory_bytes=memory)
    finally:
        remove_tenant(cache_dir, tenant)
    if proc.stopped == "timeout":
        raise KernelError(f"describing {ref} took longer than {DESCRIBE_TIMEOUT_S:g} s "
                          "(does importing it hang?)")
    if proc.stopped == "memory" and memory is not None:
        raise KernelError(f"describing {ref} used more than {memory / 2**30:.2f} GiB of host "
                          "memory (TUNER_BENCH_MEMORY_GB); killed")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        data: dict[str, Any] = dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        tail = proc.stderr.strip().splitlines()[-3:]
        raise KernelError(f"describing {ref} failed (exit {proc.returncode}): "
                          + " | ".join(tail)) from None
    if "error" in data:
        raise KernelError(str(data["error"]))
    if len(_CACHE) >= MAX_CACHED:
        _CACHE.clear()
    _CACHE[key] = data
    return data


def _only_in_bench(what: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise KernelError(f"a user kernel's {what} runs only in a bench process")

    return call


def isolated_kernel(ref: str, roots: Sequence[Path]) -> KernelSpec:
    """The ``KernelSpec`` of the user kernel ``path.py:NAME``, described in a sandbox."""
    data = _describe(ref, roots)
    known = registered()
    own = [n for n in dict(data.get("constraint_docs", {})) if n not in known or is_deferred(n)]
    for name in own:
        defer(str(name), str(data["constraint_docs"][name]))

    def problem_check(problem: Mapping[str, Any]) -> list[str]:
        return [str(e) for e in _describe(ref, roots, [problem])["problem_errors"][0]]

    # Only what the module's own code decides needs a second sandboxed child per problem: its
    # problem check, its tensor sizes, its own constraints; the rest is checked here.
    remote_check = bool(data.get("checks_problems")) or bool(own)

    return KernelSpec(
        name=str(data["name"]), description=str(data["description"]),
        dims=tuple(data["dims"]), dtypes=tuple(data["dtypes"]),
        space=SearchSpace.from_json(data["space"]),
        make_inputs=_only_in_bench("make_inputs"), launch=_only_in_bench("launch"),
        reference=_only_in_bench("reference"), output=str(data["output"]),
        flops=_only_in_bench("flops"), min_bytes=_only_in_bench("min_bytes"),
        tolerance=dict(data["tolerance"]), example_problem=dict(data["example_problem"]),
        max_dim=int(data["max_dim"]), problem_check=problem_check if remote_check else None,
        known_source_hash=str(data["source_hash"]),
        identity=_file_identity(data.get("identity"), str(data["source_hash"])))


def _file_identity(said: Any, source_hash: str) -> str:
    """The identity a described file kernel reported, unless it claims to be built in."""
    from tuner.kernels.identity import file_identity

    if isinstance(said, str) and said.startswith("jit:") and len(said) <= 64:
        return said
    return file_identity(source_hash)
