"""Relax module -> the kernels that run: build configurations (:mod:`.build_config`), their
schedules per kernel (:mod:`.schedules`), TVM's CPU pipeline around them and compilation
(:mod:`.pipeline`), and the batched constant folding it needs (:mod:`.constant_folding`)."""
