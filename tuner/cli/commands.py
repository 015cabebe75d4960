"""The ``tuner`` Typer application: every command group registered on one app."""

from __future__ import annotations

import typer

from tuner.cli import advisor
from tuner.cli import database
from tuner.cli import fleet
from tuner.cli import production
from tuner.cli import tuning
from tuner.cli import views

app = typer.Typer(
    name="tuner", no_args_is_help=True, add_completion=False,
    help="Tune Triton kernels against their roofline; store every trial; serve the best config.",
)
for group in (tuning, fleet, views, production, advisor, database):
    group.register(app)
