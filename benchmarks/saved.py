"""Saved benchmark reports read back (``--render``, ``--merge``, ``--peers-from``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load_report(parser: argparse.ArgumentParser, path: Path) -> Any:
    """The JSON at ``path``; a missing, unreadable or malformed file ends the program with one
    ``error:`` line and exit status 2 (a user's typo, not a traceback)."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        parser.exit(2, f"error: {path}: {exc.strerror or exc}\n")
    except ValueError as exc:
        parser.exit(2, f"error: {path}: not a JSON report ({exc})\n")
