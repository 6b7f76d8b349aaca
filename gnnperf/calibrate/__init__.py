"""Few-shot calibration for a machine the checkpoint has not seen.

A checkpoint trained on other CPUs predicts a new one through its hardware features
(0 shots). ``gnnperf calibrate`` measures a handful of small zoo models here, spread over
sizes, under the measurement-v2 protocol, compares them with the checkpoint's 0-shot
predictions and stores a correction for this CPU and this checkpoint: per cell (build
kind and thread count) the median log-ratio measured / predicted (a multiplicative
factor, robust to one odd model) and the spread of the ratios around it, which widens
the interval. :mod:`gnnperf.estimators.gnn.predictor` applies it to every hardware id of this CPU
and says so in the prediction; a CPU without a calibration is predicted as before.

The corrections live in the user's cache folder (``calibration.json``), keyed by the CPU
signature id and the checkpoint's SHA-256, so another checkpoint is never corrected by a
factor fitted to this one.

Before any calibration, a CPU the checkpoint never trained on gets an interval widened by
the unseen-CPU prior (:mod:`.prior`): how far the benchmark's held-out CPUs sat from
their checkpoints' predictions, per cell.

Modules: :mod:`.store` (the correction, its fit and its storage: what prediction reads),
:mod:`.selection` (which models calibrate: spread over sizes, shared with the benchmark),
:mod:`.run` (measuring the calibration models: what ``gnnperf calibrate`` runs) and
:mod:`.prior` (the 0-shot prior: its fit from held-out CPUs and its file).
"""

from __future__ import annotations

from gnnperf.calibrate.prior import PRIOR_FILE, UnseenCpuPrior, load_prior
from gnnperf.calibrate.store import (
           Calibration,
           CalibrationPoint,
           checkpoint_sha256,
           load_calibration,
           remove_calibration,
           save_calibration,
)

__all__ = ["PRIOR_FILE", "Calibration", "CalibrationPoint", "UnseenCpuPrior",
           "checkpoint_sha256", "load_calibration", "load_prior", "remove_calibration",
           "save_calibration"]
