"""The names of the build configurations (see :mod:`gnnperf.lowering.schedules` for what each does).

Kept free of TVM so that code which only reads or checks a build string (the predictor,
the dataset, the command line) does not pay TVM's import.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnnperf.errors import BuildConfigError

BUILD_KINDS = ("default", "dlight", "sampled", "tuned")


@dataclass(frozen=True)
class BuildConfig:
    """A parsed build configuration string such as ``sampled:0``."""

    kind: str
    seed: int = 0

    @classmethod
    def parse(cls, text: str | BuildConfig) -> BuildConfig:
        if isinstance(text, BuildConfig):
            return text
        kind, _, arg = str(text).strip().partition(":")
        if kind not in BUILD_KINDS:
            raise BuildConfigError(
                f"unknown build configuration '{text}'; use default, dlight, sampled:SEED "
                "or tuned"
            )
        if kind != "sampled":
            if arg:
                raise BuildConfigError(f"build '{kind}' takes no argument (got '{text}')")
            return cls(kind)
        if not arg:
            return cls(kind, 0)
        try:
            seed = int(arg)
        except ValueError:
            raise BuildConfigError(f"sampled build needs an integer seed, got '{arg}'") from None
        if seed < 0:
            raise BuildConfigError(f"sampled build seed must be >= 0, got {seed}")
        return cls(kind, seed)

    def __str__(self) -> str:
        return f"sampled:{self.seed}" if self.kind == "sampled" else self.kind
