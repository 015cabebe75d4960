"""The devices a bench process times kernels on: the one home of in-bench device probing.

* ``hardware``: the ``BenchDevice`` protocol, the CPU and the CUDA device (timing, provenance,
  measured ceilings, sticky errors).
* ``standin``: the stand-in GPU (``standin:<kind>``): real compiles for the kind, simulated
  device time, labelled as such.

Device facts that need no device (datasheets, names, this host's GPUs) are
``tuner.core.devices``; the compile-only device is
``tuner.measure.static_check.CompileDevice``; which GPU each bench process gets is
``tuner.measure.gpus``.
"""
