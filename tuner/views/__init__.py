"""Job views and their renderers: the one home of "what a job looks like" to a person.

* ``jobs``: the read model (a job's summary, recent jobs, rows for the export), read from the
  database; plain values, no rendering.
* ``progress``: the events a running job reports (a problem's progress, a new best, waiting,
  interrupted) and their one-line texts.
* ``terminal``: rich rendering for the CLI (live progress bars, the summary of a finished job,
  device-time lines and phase tables).
* ``report``: the static HTML report of a job (``tuner report``), with its charts.

Charts themselves (``tuner.charts``) stay below: the Optuna notes and the advisor draw them too.
"""
