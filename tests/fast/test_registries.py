"""Backends and searches are chosen through one registry each: unknown names are one-line
errors that list the known ones, and a registered implementation is used without editing any
caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.control.searches import SEARCHES
from tuner.control.searches import make_proposer
from tuner.core.registry import Registry
from tuner.core.registry import UnknownName
from tuner.core.target import SCHEMES
from tuner.core.target import Evidence
from tuner.core.target import Scheme
from tuner.core.target import Target
from tuner.measure.backends.registry import BACKENDS
from tuner.measure.backends.registry import make_backend


def test_a_registry_names_what_it_holds():
    r: Registry[int] = Registry("widget", {"a": 1})
    r.register("b", 2)
    assert r.names() == ("a", "b") and r.get("b") == 2 and "a" in r
    with pytest.raises(ValueError, match="already registered"):
        r.register("a", 3)
    r.register("a", 3, replace=True)
    with pytest.raises(UnknownName, match=r"unknown widget 'c' \(choose from a, b\)"):
        r.get("c")
    r.unregister("b")
    assert list(r) == ["a"]


def test_backends_by_scheme():
    assert set(BACKENDS.names()) == {"interpret", "cuda", "replay", "model", "standin"}
    with pytest.raises(ValueError, match=r"unknown backend 'tpu' .*interpret, cuda"):
        make_backend("tpu")
    assert set(BACKENDS.names()) == set(SCHEMES.names())  # one row per target scheme
    for malformed, reason in (("cuda:x", "a GPU index"), ("interpret:1", "takes no argument"),
                              ("compile:h200", "unknown backend"), ("model:cpu", "datasheet GPU"),
                              ("replay:", "needs a file")):
        with pytest.raises(ValueError, match=reason):
            make_backend(malformed)


def test_a_registered_backend_is_made_by_name():
    made: list[tuple[str, Path | None]] = []

    class Stub:
        def __init__(self, name: str, *, cache_dir: Path | None,
                     kernel_roots: tuple[Path, ...]) -> None:
            made.append((name, cache_dir))

    # A plugin registers what its targets can do (the scheme's row) and how to make one.
    SCHEMES.register("stub", Scheme("stub", "path", Evidence.MEASURED, on_gpu=False))
    BACKENDS.register("stub", Stub)
    try:
        backend = make_backend("stub:anything", cache_dir=Path("/tmp/c"))
        assert Target.parse("stub:anything").offers_best
    finally:
        BACKENDS.unregister("stub")
        SCHEMES.unregister("stub")
    assert isinstance(backend, Stub) and made == [("stub:anything", Path("/tmp/c"))]


def test_searches_by_name():
    assert SEARCHES.names() == ("auto", "tpe", "random", "grid", "gp")
    with pytest.raises(ValueError, match=r"unknown sampler 'cma' \(choose from auto, tpe"):
        make_proposer("cma", None, None, 0)  # type: ignore[arg-type]
