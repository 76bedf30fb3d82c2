"""Exception types of the project: each names the file, key or split at fault."""


class SlimError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(SlimError):
    """A configuration value is missing, unknown or out of range."""


class PlanError(ConfigError):
    """A target the run is asked for cannot be built with this config (its datasets are not in
    run_datasets, or their traces are absent); raised when the target is planned, naming the key."""


class UnknownModelError(ConfigError):
    """A model name is not in the models file (`slim/specs/models.yaml` or another)."""


class NotModelledError(ConfigError):
    """A model the project reads but cannot size: an architecture feature or a quantisation it does
    not model. `slim tune` still tunes such a model by measurement alone (no prior); every other
    command refuses it."""


class UnsupportedArchitectureError(NotModelledError):
    """A checkpoint feature not modelled at all: a per-layer number of KV heads (DeciLM-7B: ``H_kv``
    varies by layer, an ``unsupported:`` entry of the models file) and the attention variants
    `slim.specs.hf_config` lists, refused naming the key, by the models catalog and for
    `--model-config`; ingest gives such runs the status ``unsupported_model`` with the same reason.
    Routed experts, latent attention, quantised weights and KV caches and sliding windows are modelled
    (`slim.model.modern`, `slim.sim.modern_cost`)."""


class UnsupportedQuantizationError(NotModelledError):
    """A checkpoint's quantisation whose formats are not modelled (`slim.specs.quantization`): a method
    not listed, a format, a layer split or a quantised KV cache the weight and KV counts do not describe."""


class TraceFormatError(SlimError):
    """A run directory or trace file cannot be parsed; `path` names the file at fault, if one is."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


class NoUsableRunsError(TraceFormatError):
    """A trace folder holds runs but none is usable; `lines` says, per run, why, as `slim check` prints
    it (its header line first), and `runs` as its ``--json`` does (one mapping per run)."""

    def __init__(self, message: str, lines: tuple[str, ...] = (), runs: tuple[dict, ...] = ()):
        super().__init__(message)
        self.lines = tuple(lines)
        self.runs = tuple(runs)


class UnreadableTraceError(TraceFormatError):
    """A trace file exists but cannot be read: no permission, a dangling or looping symlink, an I/O error."""


class SplitError(SlimError):
    """A held-out setting selects no rows or is otherwise unusable."""


class FitError(SlimError):
    """A model fit did not converge or produced non-finite parameters."""


class NotFittedError(SlimError, ValueError, AttributeError):
    """An estimator was used before `fit` (mirrors scikit-learn's contract)."""


class AdvisorError(SlimError, ValueError):
    """Invalid input to the batching or memory advisor (empty, NaN, mismatched lengths,
    epsilon outside (0, 1), non-positive SLO)."""


class NoFeasibleCapError(AdvisorError):
    """No candidate batch cap meets the SLO and the efficiency floor (or one sequence does not fit the
    KV cache): the input is valid, the answer is "none". `decision` holds the evaluated candidates
    (a `slim.advisor.bca.BcaResult`) where there was one to evaluate."""

    def __init__(self, message: str, decision: object | None = None):
        super().__init__(message)
        self.decision = decision


class UnjudgedSloError(AdvisorError):
    """An SLO metric no usable run can judge (the runs do not record it): the message names the
    benchmark options that would record it."""


class CannotStartError(AdvisorError):
    """The program of a ``slim tune --run`` template cannot be started (not found, not executable): no
    run through it can succeed, so the loop stops at once, naming it."""


class PlotInputError(SlimError, ValueError):
    """A figure's input table lacks a column, a setting or a predictor it needs."""
