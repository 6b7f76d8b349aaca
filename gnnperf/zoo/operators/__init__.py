"""The operator sweep (``op-*``): single operators and small fused patterns over their
configuration space. :mod:`.catalog` defines them, :mod:`.sampling` draws configurations
and splits a measuring budget between operators by the kernel model's error."""

from gnnperf.zoo.operators.catalog import MAX_ELEMENTS, MAX_FLOPS, OPERATORS, PREFIX, Operator
from gnnperf.zoo.operators.sampling import allocate_sweep, sample_operator

__all__ = ["MAX_ELEMENTS", "MAX_FLOPS", "OPERATORS", "PREFIX", "Operator", "allocate_sweep",
           "sample_operator"]
