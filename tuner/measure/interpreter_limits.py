"""Say in one line when a kernel fails because of the Triton interpreter, not the kernel.

``TRITON_INTERPRET=1`` runs kernels on the CPU with numpy and does not implement everything a
compiled kernel can use: ``libdevice`` functions are stubs (the call returns ``None`` and the
next operation fails with "cannot convert None … to tensor"; ``tuner.kernels.interpreter_math``
gives the common ones numpy bodies, the rest stay missing), a dtype cannot be called as a cast
(``tl.float32(x)``), and some Triton versions cannot call ``.to`` on a Python float. Such a
failure says nothing about the config, so the bench reports it as one line naming the cause
and the place in the user's kernel, with what still works: tuning on a GPU, or
``--static-check`` (a real compile for the target).
"""

from __future__ import annotations

import linecache
import re
import sysconfig
import traceback
from pathlib import Path

ADVICE = ("the kernel can still be tuned on a GPU (--backend cuda) or checked for this GPU "
          "with --static-check")
#: Folders whose frames are not the user's: the service's packages and every installed one.
_NOT_USER = tuple(str(p) for p in (
    *(Path(__file__).resolve().parents[1] / d for d in ("tuner", "workers", "search_spaces",
                                                         "db")),
    *{Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "purelib", "platlib")}))


def is_user_file(name: str) -> bool:
    """Whether code in file ``name`` is the user's (not the service's, not installed)."""
    return not name.startswith("<") and not str(Path(name).resolve()).startswith(_NOT_USER)


def innermost_user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame in the user's own code, looked for in ``exc``'s cause first
    (an ``InterpreterError`` wraps the kernel's own exception), then in ``exc``."""
    for error in (e for e in (exc.__cause__, exc) if e is not None):
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if is_user_file(frame.filename):
                return frame
    return None


def _user_frame(exc: BaseException) -> tuple[str, int, str] | None:
    """(file, line, source) of the innermost user frame."""
    frame = innermost_user_frame(exc)
    if frame is None:
        return None
    line = frame.line or linecache.getline(frame.filename, frame.lineno or 0)
    return frame.filename, frame.lineno or 0, (line or "").strip()


def _extern_names(exc: BaseException) -> list[str]:
    """Names the failing kernel's module binds to ``triton.language.extra`` (libdevice)
    functions, which the interpreter does not implement."""
    cause = exc.__cause__ or exc
    tb = cause.__traceback__
    names: set[str] = set()
    while tb is not None:
        frame = tb.tb_frame
        if is_user_file(frame.f_code.co_filename):
            names = {n for n, v in frame.f_globals.items() if n in frame.f_code.co_names
                     and str(getattr(v, "__module__", "")).startswith("triton.language.extra")}
        tb = tb.tb_next
    return sorted(names)


def explain(exc: BaseException) -> str | None:
    """One line for a known interpreter limitation behind ``exc``; None for anything else."""
    if type(exc).__name__ != "InterpreterError":
        return None
    cause = exc.__cause__ or exc
    where = _user_frame(exc)
    at = "" if where is None else f" ({Path(where[0]).name}:{where[1]}: {where[2]})"
    source = "" if where is None else where[2]
    text = f"{type(cause).__name__}: {cause}"
    missing = re.search(r"libdevice\.(\w+)", source)
    if missing and "None" in text:
        return (f"the Triton interpreter has no libdevice.{missing.group(1)}{at}; {ADVICE}")
    extern = _extern_names(exc)
    if extern and "None" in text:  # e.g. `from ...libdevice import tanh`: tanh(x) gave None
        return (f"the Triton interpreter has no {', '.join(extern)} (a libdevice function the "
                f"kernel imports: under the interpreter it returns None){at}; {ADVICE}")
    if "'dtype' object is not callable" in text:  # tl.float32(x) is a cast in compiled code
        return (f"the Triton interpreter cannot call a dtype as a cast (tl.float32(x)); "
                f"x.to(tl.float32) works in both{at}; {ADVICE}")
    if "has no attribute 'to'" in text and ("float" in text or "int" in text):
        return (f"the Triton interpreter cannot call .to on a Python number{at}; {ADVICE}")
    return None  # a failure of the kernel itself keeps its own message
