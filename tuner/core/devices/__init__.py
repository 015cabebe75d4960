"""What the service knows about devices without running anything on them: the one home of
device facts.

* ``datasheets``: device kinds, their peak FLOP/s and bandwidth (sources in
  ``docs/PERFORMANCE_FACTS.md``) and the name normalisation (``NVIDIA H100 80GB HBM3`` →
  ``h100-sxm``).
* ``local``: this process's device kind and the facts a stored config's fingerprint is checked
  against (driver, compute capability).
* ``nvidia_smi``: the host's GPUs as ``nvidia-smi`` lists them (never by initialising CUDA here:
  the bench processes own the devices).

The devices that time a kernel (CPU, CUDA, the stand-in GPU) are ``tuner.measure.devices``;
the fake CUDA runtime for tests is ``tuner.testing.fake_cuda``.
"""
