"""The real-architecture corpus (``tf-*``): ``transformers`` model types at a ladder of sizes,
random weights, built offline. :mod:`.catalog` lists them, :mod:`.build` constructs them,
:mod:`.spec` draws their input sizes."""

from gnnperf.zoo.corpus.build import build_corpus
from gnnperf.zoo.corpus.catalog import CATALOG, MODEL_TYPES, PREFIX, Architecture, corpus_order
from gnnperf.zoo.corpus.spec import (
    corpus_inputs,
    is_real_architecture,
    sample_corpus,
    source_family,
)

__all__ = [
    "CATALOG",
    "MODEL_TYPES",
    "PREFIX",
    "Architecture",
    "build_corpus",
    "corpus_inputs",
    "corpus_order",
    "is_real_architecture",
    "sample_corpus",
    "source_family",
]
