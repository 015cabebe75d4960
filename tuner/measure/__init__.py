"""Measurement, below the control plane: backends, the isolated bench process (parent and
child), timing, devices and calibration, the compile-ahead pipeline, the stand-in GPU and
static checks. Nothing here knows about jobs, queues or the database."""
