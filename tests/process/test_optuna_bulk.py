"""The bulk writer records trials exactly as Optuna's public API does (what Optuna reads back
is the same), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.distributions import IntDistribution

from db.session import make_engine
from tuner.optuna import bulk as optuna_bulk
from tuner.optuna.bulk import TrialRecord
from tuner.optuna.mirror import frozen_trial
from tuner.optuna.storage import storage_for

DISTS = {"BLOCK": CategoricalDistribution([16, 32, 64]), "stages": IntDistribution(1, 5),
         "act": CategoricalDistribution(["relu", "gelu"])}
NOW = dt.datetime(2026, 12, 2, 12, 0, 0)


def _records() -> list[TrialRecord]:
    return [
        TrialRecord({"BLOCK": 32, "stages": 3, "act": "gelu"}, DISTS, 0.42,
                    {"status": "ok", "median_ms": 1.5, "gpu": "NVIDIA H100", "tuner_trial_id": 7},
                    NOW, NOW + dt.timedelta(seconds=2)),
        TrialRecord({"BLOCK": 64, "stages": 5, "act": "relu"}, DISTS, None,
                    {"status": "compile_error", "error": "boom", "tuner_trial_id": 8},
                    NOW, NOW + dt.timedelta(seconds=1)),
        TrialRecord({}, {}, None, {"status": "invalid", "tuner_trial_id": 9}, NOW, NOW),
        TrialRecord({"BLOCK": 16, "stages": 1, "act": "relu"}, DISTS, 0.9,
                    {"status": "ok", "tuner_trial_id": 10}, NOW, NOW),
    ]


def _view(study: optuna.Study) -> list[tuple]:
    return [(t.number, t.state, t.value, t.params, t.distributions, t.user_attrs)
            for t in study.trials]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.integration)])
def test_bulk_and_public_api_agree(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'o.db'}" if backend == "sqlite" else \
        request.getfixturevalue("postgres").create_database(f"bulk_{tmp_path.name[-10:]}")
    storage = storage_for(url)
    engine = make_engine(url)
    assert optuna_bulk.supported(engine.dialect.name)
    for name in ("public", "bulk"):
        optuna.create_study(storage=storage, study_name=name, direction="maximize")
    public_id = storage.get_study_id_from_name("public")
    for record in _records():
        storage.create_new_trial(public_id, template_trial=frozen_trial(record))
    bulk_id = storage.get_study_id_from_name("bulk")
    with engine.begin() as conn:
        ids = optuna_bulk.write(conn, bulk_id, _records()[:2])
    with engine.begin() as conn:
        ids += optuna_bulk.write(conn, bulk_id, _records()[2:])  # numbering continues
    assert len(set(ids)) == 4
    public = optuna.load_study(study_name="public", storage=url)
    bulk = optuna.load_study(study_name="bulk", storage=url)
    assert _view(bulk) == _view(public)
    assert bulk.best_trial.number == 3 and bulk.best_value == 0.9
    assert [t.datetime_complete is not None for t in bulk.trials] == [True] * 4
    engine.dispose()
