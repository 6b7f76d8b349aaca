"""The latency GNN: its network (:mod:`.network`), training configuration (:mod:`.config`),
training and checkpoints (:mod:`.training`), and the loaded checkpoint that turns kernel
graphs into predictions (:mod:`.predictor`)."""
