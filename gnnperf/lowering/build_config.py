"""The names of the build configurations (see :mod:`gnnperf.lowering.schedules` for what each does).

Kept free of TVM so that code which only reads or checks a build string (the predictor,
the dataset, the command line) does not pay TVM's import.

- ``default``, ``dlight``: no argument;
- ``sampled:SEED``: one random schedule per kernel (``sampled`` is ``sampled:0``);
- ``best-of:S``: per kernel the fastest of S random schedules, each timed alone
  (MetaSchedule's ReplayTrace at S trials; ``best-of`` is ``best-of:16``). Until
  2026-11-28 this build was called ``tuned``;
- ``tuned:N``: what a TVM user's tuning gives, MetaSchedule's evolutionary search with its
  XGBoost cost model at N trials per kernel (``static_shape_tuning``'s
  ``max_trials_per_task``). The budget is part of the name: there is no bare ``tuned``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnnperf.errors import BuildConfigError

BUILD_KINDS = ("default", "dlight", "sampled", "best-of", "tuned")
#: S of ``best-of`` without one: as many schedules as the kernel dataset measures per workload
BEST_OF_SCHEDULES = 16
#: the kinds whose kernels get a schedule picked by measuring candidates (a search)
SEARCHED_KINDS = ("best-of", "tuned")


@dataclass(frozen=True)
class BuildConfig:
    """A parsed build configuration string such as ``sampled:0`` or ``tuned:64``."""

    kind: str
    seed: int = 0
    #: ``best-of``: schedules per kernel (S); ``tuned``: trials per kernel (N); else 0
    trials: int = 0

    @classmethod
    def parse(cls, text: str | BuildConfig) -> BuildConfig:
        if isinstance(text, BuildConfig):
            return text
        kind, sep, arg = str(text).strip().partition(":")
        if kind not in BUILD_KINDS:
            raise BuildConfigError(
                f"unknown build configuration '{text}'; use default, dlight, sampled:SEED, "
                "best-of:S or tuned:N")
        if kind in ("default", "dlight"):
            if sep:
                raise BuildConfigError(f"build '{kind}' takes no argument (got '{text}')")
            return cls(kind)
        if kind == "tuned" and not arg:
            raise BuildConfigError(
                "build 'tuned' needs its budget: tuned:N is MetaSchedule's evolutionary search "
                "at N trials per kernel, as TVM's static_shape_tuning tunes; the build called "
                f"'tuned' before 2026-11-28 is best-of:{BEST_OF_SCHEDULES}")
        if not arg:
            return cls(kind) if kind == "sampled" else cls(kind, trials=BEST_OF_SCHEDULES)
        try:
            value = int(arg)
        except ValueError:
            raise BuildConfigError(f"build '{kind}' needs an integer argument, got '{arg}'"
                                   ) from None
        if kind == "sampled":
            if value < 0:
                raise BuildConfigError(f"sampled build seed must be >= 0, got {value}")
            return cls(kind, value)
        if value < 1:
            raise BuildConfigError(f"build '{kind}' needs at least 1 "
                                   f"{'schedule' if kind == 'best-of' else 'trial'}, got {value}")
        return cls(kind, trials=value)

    @property
    def searched(self) -> bool:
        """Whether each kernel's schedule is picked by timing candidates (best-of, tuned)."""
        return self.kind in SEARCHED_KINDS

    def __str__(self) -> str:
        if self.kind == "sampled":
            return f"sampled:{self.seed}"
        if self.kind in SEARCHED_KINDS:
            return f"{self.kind}:{self.trials}"
        return self.kind
