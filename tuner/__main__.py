"""``python -m tuner``: the same as the ``tuner`` command."""

from tuner.cli import main

main()
