"""Everything that touches Optuna: the only package that imports ``optuna`` or
``optuna_dashboard``, public or private.

* ``storage``: the RDB storage of the service database and each problem's study record;
* ``samplers``: Optuna's samplers (``tpe``, ``random``, ``grid``) as proposers of the search
  interface (``tuner.search.proposer``), on an in-memory study;
* ``mirror`` and ``bulk``: told trials copied into their study for optuna-dashboard;
* ``notes``: a finished study's note and roofline chart;
* ``dashboard``: optuna-dashboard served on the service database.

Two halves, so that the database is never on a proposal's critical path: proposing runs on an
in-memory study (ask and tell cost well under a millisecond instead of a dozen database round
trips), rebuilt from the service's own trial table whenever a driver (re)starts; recording copies
every told trial into the problem's study in the service database — one study per (job,
problem), named readably, objective "roofline fraction" (maximise), metrics in user attrs,
failures as FAIL trials with their status. That is what ``optuna-dashboard <db url>`` shows.
"""
