"""The base layer: values that cross boundaries, settings, device kinds and roofline math.

Everything above imports from here; nothing here imports anything of the service beyond
``search_spaces`` (``tuner.core.devices.datasheets`` describes launch limits with its
``TargetLimits``).
"""
