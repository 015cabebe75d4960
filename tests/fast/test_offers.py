"""What may become a best config: only a plausible, launchable, measured result."""

from __future__ import annotations

import pytest

from db import repository as repo
from db.models import Problem
from db.models import Trial
from tests.fast.test_db import _fresh
from tests.fast.test_db import _job_with_trial
from tuner.control.recording import MAX_FRACTION
from tuner.control.recording import JobIdentity
from tuner.control.recording import offer_trial
from tuner.core.types import JobSpec
from tuner.core.types import Measurement
from tuner.core.types import TrialStatus


def _identity(valid=None) -> JobIdentity:  # type: ignore[no-untyped-def]
    spec = JobSpec(kernel="matmul", problems=({"N": 1},), dtype="fp32", device_kind="cpu",
                   backend="interpret")
    return JobIdentity(1, spec, "k", "h", "s", "builtin", valid)


@pytest.mark.parametrize(("fraction", "valid", "offered"), [
    (0.5, None, True),
    (0.5, lambda config, problem: config["B"] == 2, False),  # the space refuses it
    (MAX_FRACTION + 0.01, None, False),  # above the roofline
    (float("inf"), None, False),
    (float("nan"), None, False),
])
def test_only_plausible_launchable_results_are_offered(tmp_path, fraction, valid, offered):
    _, sessions = _fresh(tmp_path)
    _job_with_trial(sessions)
    with sessions.begin() as s:
        trial, problem = s.get(Trial, 1), s.get(Problem, 1)
        assert trial is not None and problem is not None
        trial.device_kind = "cpu"
        assert offer_trial(s, _identity(valid), problem, trial, fraction, 1.0) is offered
        assert len(repo.best_configs(s)) == int(offered)


def test_an_implausible_score_is_flagged_and_infinite_counts_are_unscored():
    from tuner.control.recording import result_values

    def values(flops: float) -> dict[str, object]:
        return result_values(Measurement(
            status=TrialStatus.OK, median_ms=1.0, flops=flops, min_bytes=1e6,
            compute_dtype="fp32", device_kind="h100-sxm"))

    assert values(1e9)["score_basis"] == "datasheet"
    assert values(1e18)["score_basis"] == "implausible"
    assert values(float("inf"))["score_basis"] == "unscored"
    assert values(-1.0)["score_basis"] == "unscored"
