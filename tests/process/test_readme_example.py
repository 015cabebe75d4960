"""The README's worked example, run as a newcomer would: its commands in its order, from a
fresh folder, then its Python snippet. Only the dashboard is skipped (it serves until
stopped)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def _blocks(section: str, language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, flags=re.S)


def test_the_worked_example_runs_in_order(cli_env, tmp_path):
    commands = [line.split("  #")[0].strip() for line in _blocks("Worked example", "bash")[0]
                .splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 7
    env = {**cli_env, "TUNER_KERNEL_ROOTS": str(ROOT)}
    for command in commands:
        if "tuner dashboard" in command:
            continue
        command = command.replace(".venv/bin/", f"{BIN}/").replace(
            "examples/", f"{ROOT}/examples/")
        proc = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
    assert (tmp_path / "best.json").is_file()
    snippet = _blocks("Worked example", "python")[0]
    proc = subprocess.run([sys.executable, "-c", snippet + "\nprint(config)"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "BLOCK_M" in proc.stdout, proc.stderr
