"""Content hashes of files that are looked up again and again (a model file per build and
target, the checkpoint per prediction): each read once per process while unchanged."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=32)
def _sha256(path: str, inode: int, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:  # in blocks: a BERT-base ONNX file is 440 MB
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_identity(path: str | os.PathLike[str]) -> tuple[str, int, int, int]:
    """The file's resolved path, inode, size and modification time: while they hold, so do
    its bytes (what a memoised digest is keyed by, here and in the feature cache)."""
    resolved = Path(path).resolve()
    st = resolved.stat()
    return str(resolved), st.st_ino, st.st_size, st.st_mtime_ns


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of the file's bytes, memoised by :func:`file_identity`, so an edited
    or replaced file is hashed again."""
    return _sha256(*file_identity(path))
