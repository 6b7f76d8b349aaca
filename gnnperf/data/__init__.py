"""The measured dataset as PyTorch Geometric graphs, plus its statistics and splits.

Shards (``datasets/shards/*.jsonl.gz``) hold graphs and labels; re-measurements for
the noise floor live in ``datasets/noise/`` (:mod:`gnnperf.store.folder` says how a
folder is laid out). :class:`LatencyDataset` turns every
record into a ``Data`` object whose node features are the kernel features followed
by the hardware features (the hardware is on every node), with ``y`` the log of the
whole-model median latency in ms and ``y_kernel`` the log per-kernel latencies.
Features are stored raw; normalisation statistics are fitted on a training split
only (:class:`FeatureScaler`).

Modules, in the order data flows: :mod:`.encoding` (a record and its kernel graph as a
``Data``), :mod:`.dataset` (the folder as an ``InMemoryDataset``, cached per content
fingerprint), :mod:`.splits` (which records train, validate and test), :mod:`.scaling`
(normalisation fitted on training graphs), :mod:`.stats` (counts and noise floors) and
:mod:`.pack` (encoded records shipped beside the shards, so a fresh clone need not
encode them).
"""

from __future__ import annotations

from gnnperf.data.dataset import GRAPH_KINDS, LatencyDataset, existing_folder, fingerprint
from gnnperf.data.encoding import graph_to_data, record_hardware, record_to_data
from gnnperf.data.scaling import FeatureScaler
from gnnperf.data.splits import SPLITS, calibration_mask, is_testable, split_indices
from gnnperf.data.stats import dataset_stats, noise_pairs
from gnnperf.features.schema import feature_names
from gnnperf.store.folder import DatasetFolder, default_root
from gnnperf.store.records import split_group

__all__ = ["GRAPH_KINDS", "SPLITS", "DatasetFolder", "FeatureScaler",
           "LatencyDataset", "calibration_mask", "dataset_stats",
           "default_root", "existing_folder", "feature_names", "fingerprint",
           "graph_to_data", "is_testable", "noise_pairs", "record_hardware",
           "record_to_data", "split_group", "split_indices"]
