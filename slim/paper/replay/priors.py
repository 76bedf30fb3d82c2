"""The priors of the tuning replay (`slim.paper.replay`), out of sample on every dataset they
replay: a curve is never replayed with a prior fitted on its model's runs of the dataset.

SLIM's prior is the ideal roofline machine (fitted on nothing). SIM's is the shipped constants where
they were fitted on none of the dataset's runs of a model (a constants file's ``residuals`` list the
runs it was fitted on: `constants_fitted_on`), else SIM calibrated on the dataset's runs of the other
models (leave one model out). `ReplayPrior.check_out_of_sample` refuses a prior that breaks this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import AdvisorError, FitError, SplitError
from slim.model.equations import ArchitectureLookup
from slim.predictors import TrainingRuns, tune_predictors
from slim.sim.run_cache import SimulationCache
from slim.specs.hardware import Hardware
from slim.specs.slo import SloMetric
from slim.tune.belief import PriorPrediction, PriorPredictor, is_static_batch, prior_prediction


def tune_policy(name: str) -> str:
    """The replay policy of `slim tune` with the prior registered as `name` (``tune_slim``)."""
    return f"tune_{name}"


TUNE_POLICIES = tuple(tune_policy(name) for name in tune_predictors())
"""`slim tune` with each prior the registry offers it (`slim.predictors.tune_predictors`)."""


def predictor_of(policy: str) -> str:
    """The registered tuning predictor of a tune policy (``tune_sim`` -> ``sim``)."""
    return policy.removeprefix("tune_")


def run_keys(frame: pd.DataFrame, hardware: str) -> frozenset[tuple]:
    """Each run's identity: hardware, model, mean lengths in whole tokens (truncated, as a constants
    file's residuals list them), cap."""
    if frame.empty:
        return frozenset()
    return frozenset(zip([hardware] * len(frame), frame[col.MODEL].astype(str),
                         frame[col.INPUT_LEN_MEAN].astype(float).astype(int),
                         frame[col.OUTPUT_LEN_MEAN].astype(float).astype(int),
                         frame[col.MAX_NUM_SEQS].round().astype(int)))


def constants_fitted_on(path, hardware: str) -> frozenset[tuple]:
    """`run_keys` of the runs a SIM constants file was fitted on; on `hardware` where the file
    names no hardware of its own (the cautious reading)."""
    from slim.sim.constants import load_calibration_runs

    fitted_hardware, runs = load_calibration_runs(path)
    frame = runs.rename(columns={"model": col.MODEL, "input_len": col.INPUT_LEN_MEAN,
                                 "output_len": col.OUTPUT_LEN_MEAN, "max_num_seqs": col.MAX_NUM_SEQS})
    return run_keys(frame, fitted_hardware or hardware)


@dataclass(frozen=True)
class PriorSource:
    """One prior predictor, the runs it was fitted on (`run_keys`) and how, in words."""

    predictor: PriorPredictor
    fitted_on: frozenset[tuple]
    description: str


@dataclass(frozen=True)
class ReplayPrior:
    """A tuning policy's prior for one dataset: per model, the `PriorSource` that predicts its
    candidates (a model missing from `by_model` cannot be replayed, `missing` says why)."""

    policy: str
    by_model: Mapping[str, PriorSource]
    hardware: str
    missing: Mapping[str, str] = field(default_factory=dict)

    def predict(self, candidates: pd.DataFrame, metrics: Sequence[SloMetric] = ()) -> PriorPrediction:
        """Each candidate predicted by its model's prior: throughput, the in-batch E2E and `metrics`
        (`slim.tune.belief.prior_prediction`)."""
        values: dict[str, np.ndarray] = {}
        models = candidates[col.MODEL].astype(str).to_numpy()
        for model in np.unique(models):
            if model not in self.by_model:
                raise AdvisorError(f"{self.policy}: no prior for {model}: {self.missing.get(model, 'not built')}")
            rows = np.flatnonzero(models == model)
            prediction = prior_prediction(self.by_model[model].predictor, candidates.iloc[rows], metrics)
            for name, predicted in prediction.values.items():
                values.setdefault(name, np.full(len(candidates), np.nan))[rows] = predicted
        return PriorPrediction(values)

    def check_out_of_sample(self, frame: pd.DataFrame) -> None:
        """`SplitError` if a model's prior was fitted on any run of that model in `frame` (runs on
        this prior's hardware)."""
        for model, source in self.by_model.items():
            shared = source.fitted_on & run_keys(frame[frame[col.MODEL] == model], self.hardware)
            if shared:
                raise SplitError(f"{self.policy}: the prior of {model} ({source.description}) was fitted on "
                                 f"{len(shared)} of the replayed runs of {model}, e.g. {sorted(shared)[0]}: "
                                 "a replay must use an out-of-sample prior")


def slim_replay_prior(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware) -> ReplayPrior:
    """SLIM at the ideal roofline machine for every model: fitted on no run."""
    from slim.tune.belief import tune_prior

    source = PriorSource(tune_prior(tune_predictors()["slim"], architectures, hw), frozenset(),
                         "SLIM at the ideal roofline machine (fitted on no run)")
    return ReplayPrior(tune_policy("slim"), {str(m): source for m in frame[col.MODEL].unique()}, hw.name)


def sim_replay_prior(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, schedules,
                     shipped_fitted_on: frozenset[tuple]) -> ReplayPrior:
    """SIM out of sample for every model of `frame` (module docstring): the shipped constants (those
    of `schedules`, fitted on `shipped_fitted_on`) where they saw none of the model's runs here,
    else SIM calibrated on this dataset's runs of the other models."""
    from slim.tune.belief import tune_prior

    entry = tune_predictors()["sim"]
    simulations = SimulationCache()      # every prior of the dataset simulates a configuration once
    shipped = PriorSource(tune_prior(entry, architectures, hw, schedules, simulations), shipped_fitted_on,
                          "SIM at the shipped constants")
    by_model, missing = {}, {}
    for model in sorted(frame[col.MODEL].astype(str).unique()):
        if not (shipped_fitted_on & run_keys(frame[frame[col.MODEL] == model], hw.name)):
            by_model[model] = shipped
            continue
        others = frame[frame[col.MODEL] != model]
        if others.empty:
            missing[model] = "the shipped constants were fitted on its runs and no other model is here to refit on"
            continue
        try:
            fitted = entry.predictor.fit(TrainingRuns(others, architectures, hw, schedules,
                                                      f"SIM without {model}", sample_valley=False,
                                                      simulations=simulations))
        except FitError as error:
            missing[model] = f"SIM could not be refitted without it: {error}"
            continue
        by_model[model] = PriorSource(fitted, run_keys(others, hw.name),
                                      f"SIM calibrated on the {len(others)} runs of the other models")
    return ReplayPrior(tune_policy("sim"), by_model, hw.name, missing)


def replay_priors(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, schedules=None,
                  sim_constants_file=None) -> dict[str, ReplayPrior]:
    """Every tuning policy's out-of-sample prior for a dataset: SLIM's always, SIM's where the run has
    the simulator (its `schedules` at the constants of `sim_constants_file`)."""
    priors = {tune_policy("slim"): slim_replay_prior(frame, architectures, hw)}
    if schedules is not None and sim_constants_file is not None:
        priors[tune_policy("sim")] = sim_replay_prior(frame, architectures, hw, schedules,
                                                      constants_fitted_on(sim_constants_file, hw.name))
    return priors


# --- priors deliberately wrong ------------------------------------------------------------------------

ADVERSARIAL_PRIORS = ("sim_bandwidth_compute_x0.5", "sim_bandwidth_compute_x2", "sim_cap_bias")
"""The adversarial priors of the replay: SIM on an accelerator whose bandwidth and compute are half
or twice the catalog's, and SIM biased across caps (`CAP_BIAS_EXPONENT`)."""
CAP_BIAS_EXPONENT = 0.2
"""The biased prior's throughput is SIM's times ``(cap / 16)^0.2`` and its latencies divided by it:
0.57 x at cap 1, 2 x at cap 512."""


def scaled_hardware(hw: Hardware, factor: float) -> Hardware:
    """`hw` with its HBM bandwidth and peak FLOP/s times `factor` (its memory as it is)."""
    from dataclasses import replace

    return replace(hw, hbm_bandwidth_bytes_per_s=hw.hbm_bandwidth_bytes_per_s * factor,
                   peak_flops_per_s=hw.peak_flops_per_s * factor)


@dataclass(frozen=True)
class CapBiasedPrior:
    """A prior whose throughput is `base`'s times ``(cap / 16)^exponent``, its latencies divided by it."""

    name: str
    base: PriorPredictor
    exponent: float = CAP_BIAS_EXPONENT

    def _factor(self, configs: pd.DataFrame) -> np.ndarray:
        return (configs[col.MAX_NUM_SEQS].to_numpy(dtype=float) / 16.0) ** self.exponent

    def predict(self, configs: pd.DataFrame, confidence: float | None = None):
        from dataclasses import replace

        prediction = self.base.predict(configs, confidence)
        factor = self._factor(configs)
        return replace(prediction, throughput_per_s=np.asarray(prediction.throughput_per_s) * factor,
                       e2e_latency_s=np.asarray(prediction.e2e_latency_s) / factor)

    def predict_latencies(self, configs: pd.DataFrame, metrics, goodput=None) -> dict[str, np.ndarray]:
        from slim.predictors.contract import GOODPUT, predict_slo_metrics

        factor = self._factor(configs)
        return {name: values * factor if name == GOODPUT else values / factor
                for name, values in predict_slo_metrics(self.base, configs, metrics, goodput).items()}


def adversarial_priors(prior: ReplayPrior, hw: Hardware) -> dict[str, ReplayPrior]:
    """`ADVERSARIAL_PRIORS` from an out-of-sample SIM prior: the same sources on the scaled accelerator,
    or biased across caps."""
    from dataclasses import replace

    out = {}
    for name, factor in ((ADVERSARIAL_PRIORS[0], 0.5), (ADVERSARIAL_PRIORS[1], 2.0)):
        scaled = scaled_hardware(hw, factor)
        out[name] = replace(prior, policy=prior.policy, by_model={
            model: replace(source, predictor=replace(source.predictor, hardware=scaled),
                           description=f"{source.description}, bandwidth and compute x{factor:g}")
            for model, source in prior.by_model.items()})
    out[ADVERSARIAL_PRIORS[2]] = replace(prior, by_model={
        model: replace(source, predictor=CapBiasedPrior(source.predictor.name, source.predictor),
                       description=f"{source.description}, biased (cap / 16)^{CAP_BIAS_EXPONENT:g}")
        for model, source in prior.by_model.items()})
    return out


# --- a prior read from predictions made elsewhere -------------------------------------------------------

TABLE_KEY = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.TENSOR_PARALLEL, col.MAX_NUM_SEQS)
"""What identifies a predicted run of a `TabledPrior`: the workload, the layout's tensor-parallel
size and the cap (the data-parallel size too where the table has it)."""


PRIOR_THROUGHPUT, PRIOR_TPOT, PRIOR_TTFT = "prior_total_token_throughput", "prior_mean_tpot_ms", "prior_mean_ttft_ms"
"""The columns a `TabledPrior`'s table holds its predictions in."""


class TabledPrior:
    """A prior whose predictions were made before the replay, one per measured configuration: the
    simulator's zero-shot predictions of the accuracy beyond the paper (`slim.paper.beyond_paper`:
    constants calibrated on the other models' runs of the accelerator), read back by `TABLE_KEY`.
    It predicts throughput, ``mean_tpot_ms`` and ``mean_ttft_ms``, and the in-batch E2E (`_e2e_ms`);
    any other metric is NaN (measure-only), as is a configuration the table does not hold."""

    name = "sim"

    def __init__(self, table: pd.DataFrame):
        keys = [k for k in (*TABLE_KEY, col.DATA_PARALLEL) if k in table]
        self._keys = keys
        self._values = {self._key(row, keys): (float(row[PRIOR_THROUGHPUT]), float(row[PRIOR_TPOT]),
                                               float(row[PRIOR_TTFT])) for _, row in table.iterrows()}

    @staticmethod
    def _key(row, keys) -> tuple:
        out = []
        for k in keys:
            value = row.get(k) if hasattr(row, "get") else row[k]
            if k == col.MODEL:
                out.append(str(value))
            else:
                number = float(value) if value is not None else np.nan
                out.append(int(round(number)) if np.isfinite(number) else 1)
        return tuple(out)

    def _lookup(self, configs: pd.DataFrame) -> np.ndarray:
        nan = (np.nan, np.nan, np.nan)
        return np.array([self._values.get(self._key(row, self._keys), nan) for _, row in configs.iterrows()],
                        dtype=float).reshape(len(configs), 3)

    @staticmethod
    def _e2e_ms(configs: pd.DataFrame, values: np.ndarray) -> np.ndarray:
        """The in-batch E2E (ms): ``TTFT + (OL - 1) TPOT`` online; a static batch's latency, its
        ``B (IL + OL)`` tokens over the throughput, offline (no TTFT or TPOT predicted there)."""
        output_len = configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float)
        tokens = configs[col.MAX_NUM_SEQS].to_numpy(dtype=float) * (
            configs[col.INPUT_LEN_MEAN].to_numpy(dtype=float) + output_len)
        online = values[:, 2] + (output_len - 1.0) * values[:, 1]
        return np.where(is_static_batch(configs), 1e3 * tokens / values[:, 0], online)

    def predict(self, configs: pd.DataFrame, confidence: float | None = None):
        from slim.predictors.contract import Prediction

        values = self._lookup(configs)
        return Prediction(values[:, 0], self._e2e_ms(configs, values) / 1e3, np.full(len(configs), np.nan))

    def predict_latencies(self, configs: pd.DataFrame, metrics: Sequence[SloMetric], goodput=None) -> dict:
        values = self._lookup(configs)
        by_name = {"mean_tpot_ms": values[:, 1], "mean_ttft_ms": values[:, 2]}
        out = {m.name: (self._e2e_ms(configs, values) if m.in_batch
                        else by_name.get(m.name, np.full(len(configs), np.nan))) for m in metrics}
        if goodput is not None:
            from slim.decision.candidates import GOODPUT

            out[GOODPUT] = np.full(len(configs), np.nan)
        return out


def tabled_replay_prior(predictions: pd.DataFrame, runs: pd.DataFrame, prefix: str, hardware: str,
                        description: str) -> ReplayPrior:
    """``tune_sim`` from a table of predictions per run (`runs`' ``run_id`` joined to `predictions`'
    columns ``<prefix>total_token_throughput``, ``<prefix>mean_tpot_ms``, ``<prefix>mean_ttft_ms``):
    a model is replayed only where every run of it is predicted, and its source is fitted on the
    other models' runs of `hardware` (the zero-shot calibration), never its own."""
    table = runs.merge(predictions[[col.RUN_ID, f"{prefix}total_token_throughput", f"{prefix}mean_tpot_ms",
                                    f"{prefix}mean_ttft_ms"]], on=col.RUN_ID, how="left")
    table = table.rename(columns={f"{prefix}total_token_throughput": PRIOR_THROUGHPUT,
                                  f"{prefix}mean_tpot_ms": PRIOR_TPOT, f"{prefix}mean_ttft_ms": PRIOR_TTFT})
    by_model, missing = {}, {}
    for model, rows in table.groupby(col.MODEL, sort=True):
        unpredicted = int((~np.isfinite(rows[PRIOR_THROUGHPUT].to_numpy(dtype=float))).sum())
        if unpredicted:
            missing[str(model)] = f"{unpredicted} of its {len(rows)} runs have no {description} prediction"
            continue
        others = runs[(runs[col.MODEL] != model) & (runs[col.HARDWARE] == hardware)]
        by_model[str(model)] = PriorSource(TabledPrior(rows), run_keys(others, hardware), description)
    return ReplayPrior(tune_policy("sim"), by_model, hardware, missing)
