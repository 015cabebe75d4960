"""The advisor with the service's calibration: ``tuner profile`` measures the running device's
ceilings the way the workers do (``tuner.measure.calibrate``, cached under the cache folder)
when no datasheet has them."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.advisor.profile import Profile
from tuner.advisor.profile import profile_program
from tuner.core.settings import Settings


def profile(program: str, argv: Sequence[str], target_kind: str, device: str | None,
            settings: Settings) -> Profile:
    """Run ``program`` under the profiler (see ``tuner.advisor.profile``)."""
    from tuner.measure.calibrate import cached_ceilings

    return profile_program(program, argv, target_kind, device,
                           lambda dev, name: cached_ceilings(dev, name, settings.cache_dir))
