"""The import contracts of ``pyproject.toml`` (``lint-imports``, run by ``make lint``): they
cover every part of the service, and they fail when a module climbs back up."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _layered() -> set[str]:
    return {name.strip() for layer in CONTRACTS["layers"]["layers"]
            for name in layer.replace(":", "|").split("|")}


def test_every_part_of_the_service_is_in_a_layer():
    layered = _layered()
    parts = {f"tuner.{p.stem}" for p in (ROOT / "tuner").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file())
             and p.name not in ("__init__.py", "__main__.py")}
    assert parts - layered == set(), "modules of tuner/ that no layer names"
    assert set(CONFIG["root_packages"]) - {"tuner"} <= layered
    assert layered <= parts | set(CONFIG["root_packages"])


def test_the_contracts_hold_and_break_on_an_upward_import(tmp_path):
    """The real tree keeps every contract; planting three climbs breaks three of them."""
    kept = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    for package in (*CONFIG["root_packages"],):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    plants = {"tuner/core/types.py": "tuner.cli", "tuner/control/driver.py": "optuna",
              "tuner/serving/lookup.py": "torch"}
    for path, module in plants.items():
        with (tmp_path / path).open("a") as f:
            f.write(f"\n\ndef _planted() -> None:\n    import {module}  # noqa: F401\n")
    broken = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert broken.returncode != 0
    squeezed = "".join(broken.stdout.split())  # the report wraps and pads its lines
    for contract in ("layers", "optuna", "read-path"):
        name = "".join(CONTRACTS[contract]["name"].split())
        assert f"{name}BROKEN" in squeezed, broken.stdout
    for chain in ("tuner.core.types->tuner.cli", "tuner.control.driver->optuna",
                  "tuner.serving.lookup->torch"):
        assert chain in squeezed, broken.stdout
