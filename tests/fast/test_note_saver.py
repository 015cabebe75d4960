"""The study note is written by optuna-dashboard's own ``save_note`` without importing the
dashboard's web application (and, through it, scikit-learn): the note reads back with the
dashboard's public ``get_note``."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

CODE = """
import sys
import optuna
from tuner.optuna.notes import note_saver
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study()
note_saver()(study, "**best** config: " + "x" * 5000)
assert "optuna_dashboard" not in sys.modules, "the dashboard package was imported"
assert "sklearn" not in sys.modules, "scikit-learn was imported"
from optuna_dashboard import get_note
assert get_note(study) == "**best** config: " + "x" * 5000, get_note(study)[:100]
print("ok")
"""


def test_the_note_is_saved_without_importing_the_dashboard_application():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
