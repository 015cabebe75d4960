"""Every query of the service, by aggregate: ``jobs`` (jobs and problems), ``trials``,
``best`` (the best-config table) and ``fleet`` (workers, scheduler leases, the static-check
cache). Callers pass a ``Session`` and own the transaction; ``from db import repository as
repo`` reaches them all.

Writes that can race (a result delivered twice, two jobs improving the same best config) are
compare-and-set ``UPDATE … WHERE`` statements whose row count says who won; nothing here reads
a row and then writes it back unguarded.
"""

from __future__ import annotations

from db.repository.best import best_configs
from db.repository.best import best_configs_of
from db.repository.best import offer_best
from db.repository.best import results_elsewhere
from db.repository.best import stored_keys
from db.repository.fleet import cache_static
from db.repository.fleet import cached_static
from db.repository.fleet import count_trial_done
from db.repository.fleet import drivable_job_ids
from db.repository.fleet import heartbeat
from db.repository.fleet import hold_lease
from db.repository.fleet import lease_job
from db.repository.fleet import list_workers
from db.repository.fleet import register_worker
from db.repository.fleet import release_job
from db.repository.fleet import stale_workers
from db.repository.jobs import add_job
from db.repository.jobs import add_problem
from db.repository.jobs import cancel_job
from db.repository.jobs import fail_confirmation
from db.repository.jobs import finish_confirmation
from db.repository.jobs import get_job
from db.repository.jobs import job_by_idempotency_key
from db.repository.jobs import list_jobs
from db.repository.jobs import lock_problem
from db.repository.jobs import problems_of
from db.repository.jobs import set_job_status
from db.repository.jobs import update_problem
from db.repository.trials import ACTIVE_TRIAL_STATES
from db.repository.trials import add_trial
from db.repository.trials import claim_trial
from db.repository.trials import count_unmirrored
from db.repository.trials import count_untold
from db.repository.trials import expire_leases
from db.repository.trials import fail_delivery
from db.repository.trials import finish_check
from db.repository.trials import first_trial_with_config
from db.repository.trials import get_trial
from db.repository.trials import mark_published
from db.repository.trials import mark_told
from db.repository.trials import queued_trials
from db.repository.trials import set_optuna_trial_ids
from db.repository.trials import status_counts
from db.repository.trials import store_result
from db.repository.trials import top_trials
from db.repository.trials import trials_of_job
from db.repository.trials import trials_of_problem
from db.repository.trials import unmirrored_among
from db.repository.trials import unmirrored_trials
from db.repository.trials import unpublished_or_stale
from db.repository.trials import untold_final_trials

__all__ = [
    "ACTIVE_TRIAL_STATES", "add_job", "add_problem", "add_trial", "best_configs",
    "best_configs_of", "cache_static", "cached_static", "cancel_job", "claim_trial",
    "count_trial_done", "count_unmirrored", "count_untold", "drivable_job_ids",
    "expire_leases", "fail_confirmation", "fail_delivery", "finish_check",
    "finish_confirmation",
    "first_trial_with_config",
    "get_job", "get_trial", "heartbeat", "hold_lease", "job_by_idempotency_key",
    "lease_job", "list_jobs", "list_workers", "lock_problem", "mark_published",
    "mark_told", "offer_best", "problems_of", "queued_trials", "register_worker",
    "release_job", "results_elsewhere", "set_job_status", "set_optuna_trial_ids", "stale_workers",
    "status_counts", "store_result", "stored_keys", "top_trials", "trials_of_job",
    "trials_of_problem",
    "unmirrored_among", "unmirrored_trials", "unpublished_or_stale",
    "untold_final_trials", "update_problem",
]
