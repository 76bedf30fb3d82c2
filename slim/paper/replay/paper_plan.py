"""The paper's fixed profiling plan, replayed: SLIM-BCA fitted on the union of the training runs of the
dataset's applicable held-out settings (as Table VI counts them) and charged for those runs on each
curve; noise-free, on the in-batch E2E only."""

from __future__ import annotations

from typing import Any

import pandas as pd

from slim import columns as col
from slim.advisor.predictor_bca import Target, predicted_bca
from slim.errors import FitError, SplitError
from slim.model.equations import ArchitectureLookup
from slim.paper.replay.curves import ReplayCurve
from slim.paper.replay.scoring import PER_DATASET, ReplayRun, replay_row
from slim.paper.splits import HeldOutSetting, select_rows
from slim.predictors import SLIM, TrainingRuns, registered
from slim.specs.hardware import Hardware
from slim.tune.workload import curve_label


def paper_plan_training(frame: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """The union of the applicable settings' training runs (each run once)."""
    parts = [select_rows(frame, s.train) for s in settings if s.applicable]
    if not parts:
        raise SplitError("no applicable held-out setting, so no paper plan")
    union = pd.concat(parts)
    return union[~union.index.duplicated(keep="first")]



def paper_plan_rows(frame: pd.DataFrame, curves: list[ReplayCurve], architectures: ArchitectureLookup,
                     hw: Hardware, epsilon: float, held_out_settings: list[HeldOutSetting] | None,
                     full_caps: dict[str, float], binding: dict[str, bool], notes: list[str]) -> list[dict[str, Any]]:
    """SLIM-BCA fitted on the paper's training union (noise-free only)."""
    if held_out_settings is None:
        notes.append("paper_plan: the dataset names no held-out settings; not replayed")
        return []
    try:
        training = paper_plan_training(frame, held_out_settings)
        slim = registered(SLIM)
        fitted = slim.predictor.fit(TrainingRuns(training, architectures, hw, label="paper plan (union of training "
                                                 "sets)", sample_valley=False))
    except (SplitError, FitError) as error:
        notes.append(f"paper_plan: {error}; not replayed")
        return []
    trained = curve_label(training)
    rows = []
    for curve in curves:
        caps = training.loc[trained == curve.label, col.MAX_NUM_SEQS].tolist()
        chosen = predicted_bca(slim, fitted, Target.of_curve(curve.curve), curve.caps, curve.slo_s,
                               epsilon).decision.batch_cap
        rows.append(replay_row(curve, ReplayRun("paper_plan", PER_DATASET), caps, chosen, full_caps[curve.label],
                              binding[curve.label]))
    return rows
