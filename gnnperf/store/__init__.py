"""Where measurements live: crash-safe record shards (:mod:`.shards`) and the one layout of a
dataset folder every command reads and writes (:mod:`.folder`)."""
