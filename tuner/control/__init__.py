"""The control plane: jobs, their drivers, the scheduler and the queue protocol.

It decides what to measure next and records what was measured; it never measures (that is
``workers``) and never assembles processes (that is ``tuner.app``).
"""
