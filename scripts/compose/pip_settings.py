"""This host's pip settings, made usable inside an image build, as two build secrets.

pip on a build host is often configured system-wide (a configuration file, ``PIP_*``
variables, a CA bundle in ``SSL_CERT_FILE``), and some of what it names is local: a
find-links folder of wheels, a ``file://`` index. A build cannot see those. This script
reads the settings pip itself reports (``pip config list``), serves every local folder they
name over HTTP on 127.0.0.1 (the build runs with ``--network host``), and writes

* ``OUT/pip_conf``: a pip configuration with the same index URLs, find-links, trusted hosts
  and timeout, local ones rewritten to that server;
* ``OUT/pip_ca``: the CA bundle pip uses (``--cert``, ``PIP_CERT``, ``SSL_CERT_FILE`` or
  ``REQUESTS_CA_BUNDLE``), if any.

Both start with a line carrying a random marker (``OUT/marker``), so a check can prove that
neither reached an image layer. Constraint and requirement files of the host's pip are left
out: they cap versions for the host's own disk, not for an image. The script serves until it
gets SIGTERM or SIGINT; ``OUT/ready`` appears once the files are written and the server
listens.

Usage: python3 pip_settings.py OUT_DIR
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote
from urllib.parse import urlparse

KEYS = ("index-url", "extra-index-url", "find-links", "trusted-host", "timeout",
        "default-timeout", "cert")


def pip_settings() -> dict[str, list[str]]:
    """The settings pip reports, by key (``global.``, ``install.`` and ``:env:.`` alike;
    later ones win, as in pip: environment over files)."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True, check=True).stdout
    found: dict[str, list[str]] = {}
    for line in listing.splitlines():
        name, _, value = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        if key in KEYS:
            found[key] = value.strip().strip("'\"").split()
    return found


def local_dir(location: str) -> Path | None:
    """The folder a ``file://`` URL or a plain path names, else None (a remote URL)."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if not parsed.scheme and location.startswith("/"):
        return Path(location)
    return None


class Mounts:
    """Local folders served under /<n>/ by one loopback HTTP server."""

    def __init__(self) -> None:
        self.roots: list[Path] = []

    def url(self, base: str, location: str, index: bool) -> str:
        """``location`` as the build should reach it. An index URL's folder is served from
        its parent (``…/simple`` pages link to ``../../files/``)."""
        path = local_dir(location)
        if path is None:
            return location
        root = path.parent if index else path
        self.roots.append(root)
        rest = path.name + "/" if index else ""
        return f"{base}/{len(self.roots) - 1}/{rest}"


class Handler(http.server.SimpleHTTPRequestHandler):
    """Files under the mounted folders only; quiet."""

    roots: ClassVar[list[Path]] = []

    def translate_path(self, path: str) -> str:
        parts = unquote(urlparse(path).path).lstrip("/").split("/", 1)
        if not parts[0].isdigit() or int(parts[0]) >= len(self.roots):
            return "/nonexistent"
        root = self.roots[int(parts[0])].resolve()
        target = (root / (parts[1] if len(parts) > 1 else "")).resolve()
        return str(target) if target.is_relative_to(root) else "/nonexistent"

    def log_message(self, format: str, *args: object) -> None:
        pass


def ca_bundle(found: dict[str, list[str]]) -> Path | None:
    candidates = [*found.get("cert", []), os.environ.get("PIP_CERT", ""),
                  os.environ.get("SSL_CERT_FILE", ""), os.environ.get("REQUESTS_CA_BUNDLE", "")]
    for name in candidates:
        if name and Path(name).is_file():
            return Path(name)
    return None


def write_settings(out: Path, port: int, found: dict[str, list[str]], marker: str) -> Mounts:
    base = f"http://127.0.0.1:{port}"
    mounts = Mounts()
    lines = [f"# {marker}", "[global]"]
    for key in ("index-url", "extra-index-url"):
        if found.get(key):
            urls = [mounts.url(base, u, index=True) for u in found[key]]
            lines.append(f"{key} = " + " ".join(urls))
    if found.get("find-links"):
        links = [mounts.url(base, u, index=False) for u in found["find-links"]]
        lines.append("find-links = " + " ".join(links))
    if found.get("trusted-host"):
        lines.append("trusted-host = " + " ".join(found["trusted-host"]))
    timeout = found.get("timeout") or found.get("default-timeout")
    if timeout:
        lines.append(f"timeout = {timeout[0]}")
    (out / "pip_conf").write_text("\n".join(lines) + "\n")
    ca = ca_bundle(found)
    with (out / "pip_ca").open("w") as bundle:
        if ca is not None:
            bundle.write(f"# {marker}\n")
            with ca.open() as source:
                shutil.copyfileobj(source, bundle)
    (out / "marker").write_text(marker + "\n")
    return mounts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for pip_conf, pip_ca, marker, ready")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    (out / "ready").unlink(missing_ok=True)
    try:
        found = pip_settings()
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"error: cannot read pip's settings: {exc}", file=sys.stderr)
        return 1
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    mounts = write_settings(out, server.server_address[1], found, "tuner-compose-build-secret-"
                            + secrets.token_hex(16))
    Handler.roots = mounts.roots
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=functools.partial(server.serve_forever, 0.2), daemon=True)
    thread.start()
    (out / "ready").write_text(f"{server.server_address[1]}\n")
    stop.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
