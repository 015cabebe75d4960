"""A user kernel module that fails to import (for the error-message tests)."""

raise RuntimeError("this module is broken on purpose")
