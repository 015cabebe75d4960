"""The composition root: the one place that assembles processes and parts into something that
runs — a local job (``local``), the fleet's submit/watch/scheduler/worker (``fleet``),
revalidation (``revalidate``), the advisor with the service's calibration (``advisor``) — and
the read-side summaries the front ends show (``views``).

Nothing here prints: progress goes out as events (``progress``), results as values. The CLI
(``tuner.cli``) and the Python API (``tuner.api``) are thin layers on top; tests and benchmarks
call the same functions.
"""
