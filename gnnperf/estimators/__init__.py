"""Latency estimators: the kernel cost model (:mod:`.kernel`), the GNN (:mod:`.gnn`), the
additive and structural baselines (:mod:`.baselines`), and the prediction types they return
(:mod:`.types`)."""
