"""What the node features are made of (names and sizes), without TVM.

The encoding lays out a node's vector from these; the predictor and the dataset need
that layout but not the analyses that fill it, so they import this, not TVM.
"""

from __future__ import annotations

#: Names of TVM's op pattern kinds (tvm/relax/op_attr_types.h), by value.
OP_PATTERNS = {
    0: "elemwise",
    1: "broadcast",
    2: "injective",
    3: "comm_reduce",
    4: "out_elemwise_fusable",
    7: "tuple",
    8: "opaque",
}

#: The static analyses run on every kernel, each of which may fail on some kernels.
ANALYSES = ("flops", "loops", "ms_features")

#: Length of MetaSchedule's PerStoreFeature vector (buffers_per_store=5).
MS_FEATURE_DIM = 164
