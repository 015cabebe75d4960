"""A user kernel module whose attribute is not a KernelSpec (for the error-message tests)."""

SPEC = {"name": "not a spec"}
