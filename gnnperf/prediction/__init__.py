"""The public prediction API (:mod:`.api`: ``gnnperf.predict``, ``predict_many``), the kernel
graphs it reads, cached or lowered in a pool (:mod:`.graphs`), and its plots (:mod:`.plots`)."""
