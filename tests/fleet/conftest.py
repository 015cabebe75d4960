"""Fixtures shared by the fleet tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fleet.fleet import Fleet


@pytest.fixture()
def fleet(postgres, redis_server, cache_dir, tmp_path) -> Iterator[Fleet]:
    """A private fleet (see ``Fleet``); every process it started is killed afterwards."""
    f = Fleet(postgres, redis_server, cache_dir, tmp_path)
    try:
        yield f
    finally:
        f.close()
