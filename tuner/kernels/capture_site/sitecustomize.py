"""Put first on ``PYTHONPATH`` by ``tuner capture``: installs the launch recorder
(``tuner.kernels.capture_hook``) in every Python process of the captured program."""

import os
import sys

if os.environ.get("TUNER_CAPTURE_DIR"):
    try:
        from tuner.kernels.capture_hook import install

        install(os.environ["TUNER_CAPTURE_DIR"])
    except Exception as exc:  # never break the user's program
        print(f"tuner capture: not recording this process ({type(exc).__name__}: {exc})",
              file=sys.stderr)
