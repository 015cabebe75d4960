"""A worker's exit status: what a supervisor (systemd, compose ``restart: on-failure``) reads."""

from __future__ import annotations

from workers.service import UNEXPECTED_STOP
from workers.service import exit_status


def test_an_orderly_stop_that_was_asked_for_exits_zero():
    assert exit_status(0, shutdown_asked=True) == 0
    assert exit_status(None, shutdown_asked=True) == 0


def test_a_clean_return_nobody_asked_for_is_a_failure():
    assert exit_status(0, shutdown_asked=False) == UNEXPECTED_STOP != 0
    assert exit_status(None, shutdown_asked=False) == UNEXPECTED_STOP


def test_celerys_own_failure_status_is_kept():
    assert exit_status(1, shutdown_asked=True) == 1
    assert exit_status(70, shutdown_asked=False) == 70
