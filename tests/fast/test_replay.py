"""Recorded Kernel Tuner spaces: parsing, the grid as a space, the replay backend."""

from __future__ import annotations

import gzip
import statistics

import pytest

from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.core.roofline import score
from tuner.core.types import BenchmarkRequest
from tuner.measure.backends.replay import ReplayBackend

FILES = ["pnpoly_RTX_3090.json.gz", "convolution_A4000.json.gz", "dedispersion_A4000.json.gz",
         "gemm_RTX_2080_Ti.json.gz"]


def _request(backend: str, params: dict) -> BenchmarkRequest:
    return BenchmarkRequest(trial_id=1, attempt=1, job_id=1, kernel="replay", problem={},
                            dtype="fp32", params=params, backend=backend, device_kind="x")


@pytest.mark.parametrize("name", FILES)
def test_recordings_parse_and_their_grid_is_the_space(name):
    rec = load_recording(replay_file(name))
    space = recorded_space(rec)
    grid_size = 1
    for values in rec.grid.values():
        grid_size *= len(values)
    assert space.size() == grid_size
    ctx = Context(rec.problem(), "fp32")
    valid = list(space.valid_configs(ctx))
    assert len(valid) == len(rec.entries) <= grid_size
    assert {rec.key_of(c) for c in valid} == set(rec.entries)


def test_truncated_cache_file_is_closed_by_the_loader(tmp_path):
    text = gzip.decompress(replay_file("pnpoly_RTX_3090.json.gz").read_bytes()).decode()
    full = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    for cut in (text.rstrip()[:-1], text.rstrip()[:-3]):  # missing one / both closing braces
        path = tmp_path / f"cut{len(cut)}.json"
        path.write_text(cut)
        rec = load_recording(path)
        assert len(rec.entries) >= len(full.entries) - 1
    mid = tmp_path / "mid.json"
    mid.write_text(text[: len(text) // 2])  # cut inside an entry: keep the complete ones
    rec = load_recording(mid)
    assert 0 < len(rec.entries) < len(full.entries)


def test_replay_backend_keeps_recorded_statuses_and_times():
    path = replay_file("convolution_A4000.json.gz")
    backend = ReplayBackend(f"replay:{path}")
    rec = backend.recording
    by_status: dict[str, dict] = {}
    for entry in rec.entries.values():
        key = entry["time"] if isinstance(entry["time"], str) else "ok"
        by_status.setdefault(key, entry)
    params = {k: by_status["CompilationFailedConfig"][k] for k in rec.keys}
    assert backend.run(_request(backend.name, params)).status == "compile_error"
    params = {k: by_status["RuntimeFailedConfig"][k] for k in rec.keys}
    assert backend.run(_request(backend.name, params)).status == "out_of_resources"
    ok_entry = by_status["ok"]
    m = backend.run(_request(backend.name, {k: ok_entry[k] for k in rec.keys}))
    times = sorted(ok_entry["times"])
    assert m.status == "ok" and m.median_ms == pytest.approx(statistics.median(times))
    assert m.provenance["recorded_mean_ms"] == ok_entry["time"]  # Kernel Tuner's own mean
    assert m.min_ms == times[0] and m.p20_ms <= m.median_ms <= m.p80_ms
    assert m.n == len(ok_entry["times"]) and m.device_kind == "nvidia-rtx-a4000"
    s = score(m)
    assert s is not None and s.basis == "recorded-best"
    assert s.fraction == pytest.approx(rec.best_median_ms() / m.median_ms)
    best_key = min((k for k, e in rec.entries.items() if not isinstance(e["time"], str)),
                   key=lambda k: statistics.median(rec.entries[k]["times"]))
    best = backend.run(_request(backend.name, dict(zip(rec.keys, [
        rec.entries[best_key][k] for k in rec.keys], strict=True))))
    assert score(best).fraction == pytest.approx(1.0)


@pytest.mark.parametrize("blank", ['""', '"  "', None])
def test_a_recording_without_a_device_name_is_named_after_its_file(tmp_path, blank):
    """Some public caches leave ``device_name`` blank: two such recordings must not share one
    device kind (each job's transfer would take the other GPU's results for its own)."""
    text = gzip.decompress(replay_file("pnpoly_RTX_3090.json.gz").read_bytes()).decode()
    named = load_recording(replay_file("pnpoly_RTX_3090.json.gz")).device_name
    assert named and f'"device_name": "{named}"' in text
    replaced = (f'"device_name": {blank}' if blank else "")
    path = tmp_path / "anon_A.json"
    body = text.replace(f'"device_name": "{named}",', replaced + ("," if blank else ""))
    path.write_text(body)
    other = tmp_path / "anon_B.json"
    other.write_text(body + "\n")  # another file (recordings are cached by content)
    a, b = load_recording(path), load_recording(other)
    assert a.device_name == "unnamed GPU of anon_A.json"
    assert b.device_name == "unnamed GPU of anon_B.json"
