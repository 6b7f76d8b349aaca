"""Measuring the dataset: whole-model records of zoo models (:mod:`.models`), their A/A
re-measurements (:mod:`.noise`), traces of stored ``sampled`` graphs (:mod:`.graph_traces`)
and the kernel dataset in MetaSchedule's format (:mod:`.kernels`)."""
