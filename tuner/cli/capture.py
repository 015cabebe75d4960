"""``tuner capture -- CMD``: run a program once, record its Triton launches, show where the
time went (``tuner.app.capture``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly


def _problem_text(problem: dict[str, int], width: int = 60) -> str:
    text = ",".join(f"{k}={v}" for k, v in problem.items())
    return text if len(text) <= width else text[:width - 1] + "…"


def show_capture(path: Path, rows_shown: int = 20) -> None:
    """The capture's (kernel, problem) rows as a table, largest share first."""
    from tuner.app.capture import capture_rows

    rows = capture_rows(path)
    table = Table(title=f"{path}: Triton launches by share of kernel time")
    for column in ("kernel", "problem", "dtype", "calls", "seconds", "share", "MB",
                   "roofline s", "tuning saves ≤ s"):
        table.add_column(column, justify="left" if column in ("kernel", "problem") else "right")
    for row in rows[:rows_shown]:
        table.add_row(row.kernel, _problem_text(row.problem), row.dtype, str(row.calls),
                      f"{row.seconds:.4f}", f"{row.share:.1%}", f"{row.bytes / 1e6:.2f}",
                      "–" if row.roof_seconds is None else f"{row.roof_seconds:.5f}",
                      f"{row.can_save_s:.4f}")
    console.print(table)
    if len(rows) > rows_shown:
        console.print(f"… and {len(rows) - rows_shown} more in {path}", highlight=False)
    if rows and rows[0].roof_seconds is None:
        console.print("roofline: none on this device (no datasheet); a kernel can save at "
                      "most its own time (Amdahl)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``capture`` to the CLI."""

    @app.command(context_settings={"allow_extra_args": True,
                                   "ignore_unknown_options": True})
    @friendly
    def capture(
        command: Annotated[list[str] | None, typer.Argument(
            help="The program to run, after --: e.g. -- python train.py --steps 3.",
            show_default=False)] = None,
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="Where to write the capture (JSON).")] = Path("capture.json"),
    ) -> None:
        """Run a program once and record every Triton kernel launch (kernel, shapes, the
        meta-parameters its launcher chose, grid, time); then tune them in place with
        tuner tune --captured FILE. Exit status: the program's."""
        from tuner.app.capture import run_capture

        status, wall = run_capture(list(command or []), out)
        err.print(f"captured {out} ({wall:.1f} s; the program exited {status})",
                  highlight=False)
        show_capture(out)
        console.print(f"tune them in place: tuner tune --captured {out} --top 3",
                      highlight=False)
        if status != 0:
            raise typer.Exit(status)
