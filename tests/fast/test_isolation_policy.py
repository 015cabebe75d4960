"""How kernel code runs on this host is decided once and said in one line."""

from __future__ import annotations

import pytest

from tuner.core.isolation import SandboxPolicy
from tuner.core.isolation import SandboxUnavailable
from tuner.core.isolation import sandbox_mode


def test_off_is_same_user_mode_and_says_why():
    policy = SandboxPolicy.from_env({"TUNER_SANDBOX": "off"})
    assert not policy.isolate and policy.off
    assert sandbox_mode(policy) == ("kernel code runs as this user "
                                    "(same-user mode: TUNER_SANDBOX=off)")


def test_an_isolated_policy_says_so():
    assert "sandbox users of its own" in sandbox_mode(SandboxPolicy(isolate=True))


def test_require_refuses_a_host_that_cannot_isolate(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable, match="not root"):
        SandboxPolicy.from_env({"TUNER_SANDBOX": "require"})


def test_id_ranges_are_read_as_first_last():
    policy = SandboxPolicy.from_env({"TUNER_SANDBOX": "off",
                                     "TUNER_SANDBOX_UIDS": "300000-300009"})
    assert policy.uids == (300_000, 10)
