"""Where a trial runs, parsed once: ``Target.parse("cuda:1")`` and what follows from it.

A target is written ``scheme`` or ``scheme:argument`` (``--backend``, ``JobSpec.backend``, a
request, a stored row); ``str(target)`` gives the same text back, so every stored string stays
valid. The schemes and what each can do are one table (``SCHEMES``); every question the rest of
the service asks about a target (does it run on a GPU, may its results be served, does it
compile ahead, which queue) is answered here and nowhere else — a test fails on a backend-name
check anywhere else.

=============  ==========  =========  ===============================================
scheme         argument    evidence   what runs
=============  ==========  =========  ===============================================
``interpret``  –           measured   real kernels on the Triton interpreter (host CPU)
``cuda``       GPU index   measured   real kernels on an NVIDIA GPU (``cuda:N``: GPU N)
``standin``    GPU kind    simulated  real compiles for the kind, simulated device time
``model``      GPU kind    predicted  the kernel's analytic model, nothing runs
``replay``     file        recorded   times recorded by another tuner (Kernel Tuner)
=============  ==========  =========  ===============================================
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import known_kinds
from tuner.core.registry import Registry

#: The queue of work that needs no GPU: the interpreter, replays, models, static checks.
CPU_QUEUE = "cpu"


class Evidence(enum.Enum):
    """What a target's figures are."""

    MEASURED = "measured"
    SIMULATED = "simulated"
    PREDICTED = "predicted"
    RECORDED = "recorded"


@dataclass(frozen=True)
class Scheme:
    """One row of the table: ``argument`` is ``""`` (none), ``"index"`` (optional GPU
    index), ``"kind"`` (a datasheet GPU kind) or ``"path"`` (a file); ``on_gpu``: it times a
    GPU, or poses as one (its trials go to the kind's queue and are compiled ahead).
    Static checks are no target: a builder for the GPU kind compiles them
    (``tuner.measure.backends.base.Builder``)."""

    name: str
    argument: str
    evidence: Evidence
    on_gpu: bool


SCHEMES: Registry[Scheme] = Registry("backend", {s.name: s for s in (
    Scheme("interpret", "", Evidence.MEASURED, on_gpu=False),
    Scheme("cuda", "index", Evidence.MEASURED, on_gpu=True),
    Scheme("standin", "kind", Evidence.SIMULATED, on_gpu=True),
    Scheme("model", "kind", Evidence.PREDICTED, on_gpu=False),
    Scheme("replay", "path", Evidence.RECORDED, on_gpu=False),
)})

USAGE = ("auto, interpret, cuda, cuda:N, replay:<kernel tuner cache file>, model:<gpu kind> "
         "or standin:<gpu kind>")


class BadTarget(ValueError):
    """Text that names no target; the message says what would."""


@dataclass(frozen=True)
class Target:
    """A parsed target; build it with ``Target.parse``."""

    scheme: Scheme
    argument: str = ""

    @classmethod
    def parse(cls, text: str) -> Target:
        """``BadTarget`` for an unknown scheme, a missing or malformed argument, or a GPU kind
        the device table does not hold."""
        name, sep, argument = text.partition(":")
        scheme = SCHEMES.get(name) if name in SCHEMES else None
        if scheme is None:
            raise BadTarget(f"unknown backend {text!r} ({USAGE})")
        if scheme.argument == "" and sep:
            raise BadTarget(f"the {name} backend takes no argument: {name!r}, not {text!r}")
        if scheme.argument == "index" and sep and not re.fullmatch(r"\d{1,3}", argument):
            raise BadTarget(f"{text!r}: a GPU index comes after cuda: (cuda:0, cuda:1, …)")
        if scheme.argument == "path" and not argument:
            raise BadTarget(f"{text!r}: replay needs a file (replay:<kernel tuner cache file>)")
        if scheme.argument == "kind" and argument not in gpu_kinds():
            what = {"model": "model backend predicts", "standin": "stand-in simulates"}.get(
                name, f"{name} backend runs on")
            raise BadTarget(f"the {what} a datasheet GPU: {name}:<kind> with kind in "
                            f"{', '.join(gpu_kinds())}")
        return cls(scheme, argument)

    def __str__(self) -> str:
        return f"{self.scheme.name}:{self.argument}" if self.argument else self.scheme.name

    @property
    def evidence(self) -> Evidence:
        return self.scheme.evidence

    @property
    def is_interpreter(self) -> bool:
        """Real kernels on the host CPU (device kind ``cpu``; launch options are ignored)."""
        return self.scheme.name == "interpret"

    @property
    def is_cuda(self) -> bool:
        """Real kernels on a real GPU."""
        return self.scheme.name == "cuda"

    @property
    def on_gpu(self) -> bool:
        """Times a GPU or poses as one: its trials are compiled ahead and queued by kind."""
        return self.scheme.on_gpu

    @property
    def gpu_index(self) -> int | None:
        """``N`` of ``cuda:N``; ``None`` for plain ``cuda`` (and every other scheme)."""
        return int(self.argument) if self.scheme.argument == "index" and self.argument else None

    @property
    def gpu_kind(self) -> str | None:
        """The datasheet kind a ``model``/``standin`` target names."""
        return self.argument if self.scheme.argument == "kind" else None

    @property
    def recording(self) -> str | None:
        """The file a ``replay`` target answers from."""
        return self.argument if self.scheme.argument == "path" else None

    @property
    def offers_best(self) -> bool:
        """Its results may become a served best config (measured or recorded, never a
        prediction or a simulation)."""
        return self.evidence in (Evidence.MEASURED, Evidence.RECORDED)

    @property
    def has_noise(self) -> bool:
        """Its times vary from run to run: finalists are confirmed and old results can be
        re-measured (not so for recorded or predicted times)."""
        return self.evidence in (Evidence.MEASURED, Evidence.SIMULATED)

    @property
    def mark(self) -> str:
        """How a figure from it is labelled next to measured ones."""
        return {Evidence.SIMULATED: " (simulated)",
                Evidence.PREDICTED: " (predicted)"}.get(self.evidence, "")

    def queue(self, device_kind: str) -> str:
        """The fleet queue its trials go to: ``bench.<kind>`` on a GPU (a stand-in poses as
        that GPU), else ``CPU_QUEUE``."""
        return f"bench.{device_kind}" if self.on_gpu else CPU_QUEUE


def gpu_kinds() -> list[str]:
    """The datasheet GPU kinds a ``model``/``standin`` target may name (and builders compile
    for)."""
    return [k for k in known_kinds() if k != CPU_KIND]


def parse_worker_device(text: str) -> Target:
    """A worker's ``--device``: ``cpu`` (the interpreter), ``cuda:N`` (GPU N) or
    ``standin:<kind>`` (a simulated GPU); ``BadTarget`` otherwise."""
    if text == CPU_KIND:
        return Target.parse("interpret")
    unknown = BadTarget(f"unknown device {text!r}: give cpu, cuda:N for GPU N (one worker per "
                        "GPU) or standin:<gpu kind>")
    if text.partition(":")[0] not in ("cuda", "standin"):
        raise unknown
    target = Target.parse(text)  # a stand-in's message lists the GPU kinds
    if target.is_cuda and target.gpu_index is None:
        raise unknown
    return target


def as_target(backend: str | Target) -> Target:
    """``backend`` as a target (``BadTarget`` for text that names none)."""
    return backend if isinstance(backend, Target) else Target.parse(backend)
