"""The pieces that keep hostile input out: bounds, tickets, the sandbox's environment, NVML by
UUID, the read-only dashboard."""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from typing import ClassVar

import pytest

from tuner.control.tickets import Ticket
from tuner.core.limits import spec_errors
from tuner.core.sandbox import is_allowed
from tuner.core.sandbox import sandbox_environment
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.measure.devices.hardware import _Nvml
from tuner.measure.devices.hardware import nvml_uuid
from tuner.optuna.dashboard import read_only

SPEC = JobSpec(kernel="matmul", problems=[{"M": 64, "N": 64, "K": 64}], dtype="fp16",
               backend="interpret", device_kind="cpu")


def test_a_sane_spec_keeps_every_bound():
    assert spec_errors(SPEC) == []


@pytest.mark.parametrize(("change", "text"), [
    ({"compile_timeout_s": 1e300}, "--compile-timeout"),
    ({"run_timeout_s": math.nan}, "finite"),
    ({"run_timeout_s": math.inf}, "finite"),
    ({"max_attempts": 0}, "--max-attempts"),
    ({"parallel": 0}, "--parallel"),
    ({"idempotency_key": "x" * 201}, "201 characters"),
    ({"idempotency_key": "a\x00b"}, "control characters"),
    ({"seed": -1}, "--seed"),
    ({"confirm_top": 1000}, "--confirm-top"),
    ({"budget": Budget(trials=0)}, "--trials"),
    ({"budget": Budget(trials=5, target_fraction=0)}, "--target"),
    ({"timing": TimingSettings(rep_ms=-5)}, "--rep-ms"),
    ({"timing": TimingSettings(warmup_ms=math.inf)}, "--warmup-ms"),
    ({"problems": [{"M": 1}] * 1001}, "problems in one job"),
])
def test_every_out_of_bounds_value_is_named(change, text):
    errors = spec_errors(dataclasses.replace(SPEC, **change))
    assert len(errors) == 1 and text in errors[0], errors


@pytest.mark.parametrize("data", [
    {"mode": "bench", "ref": 1},
    {"mode": "bench", "ref": 1, "attempt": 1, "problem": {"N": 10**9}},
    {"mode": "run", "ref": 1, "attempt": 1},
    {"mode": "bench", "ref": 0, "attempt": 1},
    {"mode": "bench", "ref": "1", "attempt": 1},
    {"mode": "bench", "ref": True, "attempt": 1},
    {"mode": "bench", "ref": 2**64, "attempt": 1},
    ["bench", 1, 1],
])
def test_a_ticket_is_three_checked_fields_and_nothing_else(data: Any):
    with pytest.raises(ValueError):
        Ticket.from_json(data)
    assert Ticket.from_json({"mode": "check", "ref": 7, "attempt": 2}) == Ticket("check", 7, 2)


def test_the_sandbox_environment_is_an_allowlist():
    env = {"PATH": "/bin", "HOME": "/h", "TUNER_DB_URL": "postgresql://u:p@h/d",
           "TUNER_BROKER_URL": "redis://:p@h", "AWS_SECRET_ACCESS_KEY": "x", "PGPASSWORD": "x",
           "HF_TOKEN": "x", "TRITON_CACHE_DIR": "/c", "TRITON_API_KEY": "x",
           "CUDA_VISIBLE_DEVICES": "3", "LC_ALL": "C", "SOMETHING_ELSE": "x"}
    out = sandbox_environment(env=env)
    assert {k for k in out if k in env} == {"PATH", "HOME", "TRITON_CACHE_DIR",
                                           "CUDA_VISIBLE_DEVICES", "LC_ALL"}
    assert not is_allowed("TRITON_API_KEY")  # a secret-looking name under an allowed prefix


class _FakePynvml:
    """Two GPUs; NVML's index 0 is GPU-aaaa, whatever CUDA_VISIBLE_DEVICES says."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
    CLOCKS: ClassVar[dict[str, int]] = {"GPU-aaaa": 1980, "GPU-bbbb": 1410}

    def nvmlInit(self) -> None:
        return None

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return ["GPU-aaaa", "GPU-bbbb"][i]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if uuid not in self.CLOCKS:
            raise KeyError(uuid)
        return uuid

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return self.CLOCKS[h]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54"


def test_nvml_reads_the_gpu_of_this_process_by_uuid():
    """A worker pinned to the second GPU (its CUDA UUID bbbb) reads that GPU's clocks."""
    nvml = _Nvml("bbbb", module=_FakePynvml())
    assert nvml.snapshot()["sm_clock_mhz"] == 1410
    assert nvml_uuid("GPU-bbbb") == "GPU-bbbb" and nvml_uuid("MIG-x") == "MIG-x"
    assert _Nvml("", module=_FakePynvml()).snapshot() == {}  # no UUID: nothing, not GPU 0


def test_the_dashboard_refuses_writes_unless_allowed():
    calls: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(environ["REQUEST_METHOD"])
        start_response("200 OK", [])
        return [b"ok"]

    statuses: list[str] = []
    guarded = read_only(app)
    for method in ("GET", "HEAD", "DELETE", "POST", "PUT", "PATCH"):
        guarded({"REQUEST_METHOD": method}, lambda status, headers: statuses.append(status))
    assert calls == ["GET", "HEAD"]
    assert statuses[2:] == ["405 Method Not Allowed"] * 4


def test_no_task_the_bounds_allow_outlives_the_visibility_timeout():
    """Checklist #12: the longest task a job may ask for is acknowledged before Redis would
    hand its message to another worker (a second delivery would still stop at the claim:
    ``test_fleet_faults.py::test_same_message_delivered_twice``)."""
    from tuner.core.limits import BOUNDS
    from tuner.core.types import BenchmarkRequest
    from workers.celery_app import VISIBILITY_TIMEOUT_S
    from workers.celery_app import celery_config
    from workers.celery_app import time_limits

    longest = BenchmarkRequest(
        trial_id=1, attempt=1, job_id=1, kernel="matmul", problem={}, dtype="fp16",
        params={}, backend="cuda", device_kind="h100-sxm",
        compile_timeout_s=BOUNDS["compile_timeout_s"].high,
        run_timeout_s=BOUNDS["run_timeout_s"].high)
    soft, hard = time_limits(longest)
    assert soft < hard < VISIBILITY_TIMEOUT_S
    from tuner.core.settings import Settings

    config = celery_config(Settings(db_url="sqlite://", cache_dir=None))  # type: ignore[arg-type]
    assert config["broker_transport_options"]["visibility_timeout"] == VISIBILITY_TIMEOUT_S


def _explained(cause: Exception) -> str | None:
    """``explain`` of an ``InterpreterError`` wrapping ``cause``, raised from this file (as a
    kernel's own line would be)."""
    from triton.runtime.errors import InterpreterError

    from tuner.measure.interpreter_limits import explain

    try:
        try:
            raise cause
        except Exception as inner:
            raise InterpreterError(repr(inner)) from inner
    except InterpreterError as exc:
        return explain(exc)


def test_interpreter_limits_are_named_in_one_line():
    from tuner.measure.interpreter_limits import explain

    text = _explained(AttributeError("'float' object has no attribute 'to'"))
    assert text is not None and "cannot call .to on a Python number" in text
    assert "test_hardening.py:" in text and "--static-check" in text and "\n" not in text
    assert explain(ValueError("not the interpreter")) is None


def test_calling_a_dtype_is_named_in_one_line():
    text = _explained(TypeError("'dtype' object is not callable"))
    assert text is not None and "cannot call a dtype as a cast" in text
    assert "x.to(tl.float32)" in text and "test_hardening.py:" in text and "\n" not in text


def test_a_libdevice_function_imported_by_name_is_named(tmp_path, monkeypatch):
    """``from …libdevice import j0`` then ``j0(x) * y``: under the interpreter j0 (which
    ``tuner.kernels.interpreter_math`` gives no body) returns None and the *next* line fails;
    the message names j0 and the failing line."""
    import importlib.util
    import sys

    import torch

    module = tmp_path / "uses_libdevice.py"
    module.write_text(
        "import triton\nimport triton.language as tl\n"
        "from triton.language.extra.libdevice import j0\n\n\n"
        "@triton.jit\ndef k(X, Y, N: tl.constexpr):\n"
        "    x = tl.load(X + tl.arange(0, N))\n"
        "    t = j0(x)\n"
        "    tl.store(Y + tl.arange(0, N), t * x)\n")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location("uses_libdevice", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["uses_libdevice"] = mod
    try:
        spec.loader.exec_module(mod)
        from tuner.measure.interpreter_limits import explain

        x = torch.randn(16)
        try:
            mod.k[(1,)](x, torch.empty_like(x), N=16)
        except Exception as exc:
            text = explain(exc)
        else:
            raise AssertionError("the interpreter ran libdevice.j0: this check is moot")
    finally:
        del sys.modules["uses_libdevice"]
    assert text is not None and "has no j0" in text, text
    assert "uses_libdevice.py:10" in text and "\n" not in text
