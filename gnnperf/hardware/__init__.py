"""The hardware a prediction is for: the CPU signature hardware ids derive from
(:mod:`.cpu_identity`) and :class:`~gnnperf.hardware.spec.HardwareSpec` (ISA, threads,
caches, measured peak and bandwidth, reference-kernel times) in :mod:`.spec`."""
