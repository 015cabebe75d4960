"""optuna-dashboard on the service database: every job's studies, with their artifacts.

optuna-dashboard has no authentication, and its API deletes studies and edits trials. The
service serves it **read-only** unless asked otherwise: every request other than GET, HEAD
or OPTIONS is answered ``405`` before it reaches the dashboard (``read_only``).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tuner.optuna.storage import storage_for

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def read_only(app: WsgiApp) -> WsgiApp:
    """``app`` refusing every request that could change something (405)."""
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET").upper() not in SAFE_METHODS:
            start_response("405 Method Not Allowed",
                           [("Content-Type", "text/plain"), ("Allow", ", ".join(SAFE_METHODS))])
            return [b"this dashboard is read-only (tuner dashboard --allow-writes)\n"]
        return app(environ, start_response)

    return guarded


def dashboard_app(db_url: str, artifact_dir: Path | None, allow_writes: bool = False) -> WsgiApp:
    """The dashboard's WSGI application (read-only unless ``allow_writes``)."""
    from optuna_dashboard import wsgi

    store = None
    if artifact_dir is not None:
        from optuna.artifacts import FileSystemArtifactStore

        artifact_dir.mkdir(parents=True, exist_ok=True)
        store = FileSystemArtifactStore(str(artifact_dir))
    app: WsgiApp = wsgi(storage_for(db_url), artifact_store=store)
    return app if allow_writes else read_only(app)


def serve(db_url: str, host: str, port: int, artifact_dir: Path | None,
          allow_writes: bool = False) -> None:
    """Run the dashboard in this process until interrupted (blocking)."""
    from wsgiref.simple_server import make_server

    with make_server(host, port, dashboard_app(db_url, artifact_dir, allow_writes)) as server:
        server.serve_forever()
