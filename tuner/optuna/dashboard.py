"""optuna-dashboard on the service database: every job's studies, with their artifacts."""

from __future__ import annotations

from pathlib import Path

from tuner.optuna.storage import storage_for


def serve(db_url: str, host: str, port: int, artifact_dir: Path | None) -> None:
    """Run optuna-dashboard in this process until interrupted (blocking)."""
    from optuna_dashboard import run_server

    store = None
    if artifact_dir is not None:
        from optuna.artifacts import FileSystemArtifactStore

        artifact_dir.mkdir(parents=True, exist_ok=True)
        store = FileSystemArtifactStore(str(artifact_dir))
    run_server(storage_for(db_url), host=host, port=port, artifact_store=store)
