"""Serving: what production code reads, and the one home of every way it reads it.

* ``lookup``: ``best_config`` (exact → bucket → nearest → default tiers) from the database or an
  exported file; the read path imports nothing heavy (an import contract).
* ``autotune``: ``@tuner.autotune``, a drop-in for ``@triton.autotune`` that launches with the
  tuned configs.
* ``production``: ``triton_configs`` (tuned configs as ``triton.Config`` for Triton's own
  autotuner) and ``@tuned`` (a launcher that picks its config per call).
* ``export``: the strict-JSON export (and a self-contained Python module) for hosts without the
  database.
* ``staleness``: a stored config's fingerprint against this process (Triton, torch, driver, …).

``tuner.best_config`` and ``tuner.autotune`` are the same functions, imported lazily.
"""
