"""What one run of the workflow builds: the datasets, their subsets (evaluated, advisor study, Fig. 10,
Fig. 12, SIM, ...) and every target list the rules read, from the validated config and the resolved
datasets (`slim.pipeline.prepare.prepare_run` makes the plan the workflow uses).

`Plan` needs no Snakemake: the rules' input functions (workflow/rules/common.smk) only pass a
job's wildcards to it, so the target lists are unit-tested (tests/test_planning.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from slim.errors import PlanError
from slim.paper.advisor_study_config import BcaStudyConfig, load_bca_config
from slim.paper.splits import HeldOutSetting, fig10_setting_name, load_settings, table4_setting_names
from slim.pipeline.config import DatasetConfig, ResolvedDatasets
from slim.pipeline.snakemake_inputs import GeneralisationInputs
from slim.pipeline.trace_locations import AbsentDataset, trace_cache
from slim.pipeline.tuning_plan import TuningTargets

DEFAULT_ARTEFACTS = (
    "table3.tex", "table3_paper.tex", "table4.tex", "fig9.pdf", "fig9.png", "fig10.pdf", "fig10.png",
    "fig2.pdf", "fig2.png", "table5.tex", "table6.tex", "fig12.pdf", "fig12.png", "fig13.pdf", "fig13.png",
    "table_advisors.tex",
)
"""Artefacts copied from figures/<default dataset>/ to the top of figures/."""
BCA_ARTEFACTS = ("table5.tex", "table6.tex", "fig12.pdf", "fig12.png", "fig13.pdf", "fig13.png", "table_advisors.tex")
"""The advisor study's, for the datasets whose config names its file (datasets.<name>.bca)."""
FIG12_ARTEFACTS = ("fig12.pdf", "fig12.png")
"""Where the advisor config names a single-curve transfer (its fig12_transfers)."""
FIG10_ARTEFACTS = ("fig10.pdf", "fig10.png")
"""Where a held-out setting predicts an unseen model."""
CROSS_ACCELERATOR_ARTEFACTS = (
    "results/accelerators/cross_accelerator.csv", "results/accelerators/advisors.csv",
    "results/accelerators/cross_accelerator.md", "figures/accelerators/cross_accelerator.html",
    "figures/accelerators/measured_vs_predicted.pdf", "figures/accelerators/measured_vs_predicted.png",
)
ACCELERATORS_COMMAND = "snakemake --cores 2 accelerators --configfile config/config.yaml config/accelerators.yaml"
BEYOND_PAPER_COMMAND = "snakemake --cores 2 beyond_paper --configfile config/config.yaml config/beyond_paper.yaml"
_NOT_IN_RULE_NAMES = re.compile(r"\W")


def _alternatives(names) -> str:
    """A regular expression matching exactly one of `names` (a wildcard constraint)."""
    return "|".join(re.escape(name) for name in names)


@dataclass(frozen=True)
class Plan(TuningTargets):
    """The datasets this run builds and what the rules make of them.

    `datasets` are those of run_datasets whose traces exist (in run_datasets order), `absent` the
    real ones skipped for want of traces, `settings` the held-out settings of every dataset that
    names a settings file, and `bca_configs` the advisor config of every one of those that names
    one. Lists that can fail (the cross-accelerator table's) raise `PlanError` only when asked for,
    so a run that does not ask for them builds everything else.
    """

    config: Mapping[str, Any]
    datasets: Mapping[str, DatasetConfig]
    absent: Mapping[str, AbsentDataset]
    settings: Mapping[str, list[HeldOutSetting]]
    bca_configs: Mapping[str, BcaStudyConfig]

    @classmethod
    def build(cls, config: Mapping[str, Any], resolved: ResolvedDatasets,
              read_settings: Callable[[Path], list[HeldOutSetting]] = load_settings,
              read_bca: Callable[[Path], BcaStudyConfig] = load_bca_config) -> Plan:
        """The plan of a schema-valid config whose datasets `resolve_datasets` resolved; reads every
        settings and advisor file the datasets name (`read_settings` and `read_bca`)."""
        datasets = resolved.available
        settings = {name: read_settings(dataset.settings_file) for name, dataset in datasets.items()
                    if dataset.settings_file is not None}
        bca_configs = {name: read_bca(datasets[name].bca_file) for name in settings
                       if datasets[name].bca_file is not None}
        return cls(config, datasets, resolved.absent, settings, bca_configs)

    # Dataset subsets, each in run_datasets order.

    @property
    def default_dataset(self) -> str:
        return self.config["default_dataset"]

    @property
    def evaluated_datasets(self) -> list[str]:
        """The datasets with held-out settings: Tables III and IV, Figs. 2 and 9."""
        return list(self.settings)

    @property
    def bca_datasets(self) -> list[str]:
        """The evaluated datasets whose config names an advisor study (datasets.<name>.bca); the tuning
        replay covers the same."""
        return [name for name in self.settings if self.datasets[name].bca_file is not None]

    @property
    def fig12_datasets(self) -> list[str]:
        """The advisor-study datasets whose advisor config names a single-curve transfer."""
        return [name for name in self.bca_datasets if self.bca_configs[name].fig12_transfers]

    @cached_property
    def fig10_settings(self) -> dict[str, str | None]:
        """Fig. 10's setting per evaluated dataset (None: the dataset has no Fig. 10)."""
        return {name: fig10_setting_name(settings) for name, settings in self.settings.items()}

    @property
    def sim_datasets(self) -> list[str]:
        """Where SIM (the calibrated simulator as a held-out predictor) is evaluated: the real evaluated
        datasets, where the config has the simulator's section (its rules exist only then). On
        simulated data it would predict its own output (a circular score)."""
        if "simulator" not in self.config:
            return []
        return [name for name in self.settings if not self.datasets[name].is_simulated]

    @property
    def slo_prediction_datasets(self) -> list[str]:
        """Where the SLO metrics' held-out accuracy and the frontiers are built: the datasets of config
        slo_predictions this run evaluates with SIM (the per-request simulation needs its schedules)."""
        listed = self.config.get("slo_predictions", {}).get("datasets", [])
        return [name for name in listed if name in self.sim_datasets]

    @property
    def layout_choice_datasets(self) -> list[str]:
        """Where the layout decision is measured (results/<dataset>/layout_choices.*, per-GPU frontiers of
        the measured runs): the datasets of config layout_choices.datasets this run reads."""
        listed = self.config.get("layout_choices", {}).get("datasets", {})
        return [name for name in listed if name in self.datasets]

    def layout_choice_kinds(self, dataset: str) -> dict[str, list[str]]:
        """A layout-choice dataset's SLO kinds: name -> its ``--slo`` texts."""
        return dict(self.config["layout_choices"]["datasets"][dataset])

    @property
    def sensitivity_datasets(self) -> list[str]:
        """Datasets with the baselines' readings (results/<dataset>/baseline_sensitivity.csv): the
        evaluated ones, less those read from summary tables, which hold offline static batches (one
        latency per batch, no ITL) on which LLMVisor-Agg is not fitted."""
        return [name for name in self.settings if not self.datasets[name].reads_summary_tables]

    @property
    def batch_scaling_datasets(self) -> list[str]:
        """Fig. 1's rows: the datasets of config batch_scaling this run builds, in the configured order."""
        return [name for name in self.config.get("batch_scaling", {}).get("datasets", []) if name in self.datasets]

    @property
    def real_datasets(self) -> list[str]:
        """The datasets read from measured traces (ingest depends on their trace manifest)."""
        return [name for name, dataset in self.datasets.items() if not dataset.is_simulated]

    @property
    def builds_generalisation(self) -> bool:
        return self.config.get("generalisation", {}).get("dataset") in self.datasets

    @property
    def builds_simulator_validation(self) -> bool:
        return self.config.get("simulator", {}).get("calibration_dataset") in self.datasets

    # Wildcard constraints and rule names.

    @property
    def dataset_pattern(self) -> str:
        return _alternatives(self.datasets)

    @property
    def absent_dataset_pattern(self) -> str:
        return _alternatives(self.absent)

    @property
    def default_artefact_pattern(self) -> str:
        """Only these names match figures/{artefact}, so rules writing other top-level figures
        (figures/table1.tex, figures/fig3.pdf) need no ruleorder."""
        return _alternatives(DEFAULT_ARTEFACTS)

    @staticmethod
    def rule_name(prefix: str, dataset: str) -> str:
        """`prefix`_`dataset`: the names of the rules defined once per dataset (evaluate.smk, figures.smk)."""
        return f"{prefix}_{_NOT_IN_RULE_NAMES.sub('_', dataset)}"

    # Traces.

    @property
    def trace_cache(self) -> str:
        """The folder fetched trace sources go to (config fetch.cache)."""
        return trace_cache(self.config).as_posix()

    @property
    def trace_sources(self) -> list[str]:
        """The public trace sets `fetch_traces` downloads: those the run's datasets, skipped ones
        included, name as their source."""
        sources = [dataset.source for dataset in self.datasets.values()]
        sources += [dataset.source for dataset in self.absent.values()]
        return sorted({source for source in sources if source})

    @staticmethod
    def trace_manifest(dataset: str) -> str:
        """The manifest of a real dataset's trace files, which its ingest depends on."""
        return f"results/{dataset}/trace_manifest.tsv"

    def ingest_traces(self, dataset: str) -> str:
        """What ingest depends on: the simulator's output folder (simulated data) or the trace manifest."""
        resolved = self.datasets[dataset]
        return str(resolved.trace_dir) if resolved.is_simulated else self.trace_manifest(dataset)

    def dataset_rows(self, dataset: str) -> dict[str, list[Any]]:
        """The dataset's own rows of a shared table (config datasets.<name>.rows), or {} for all; lists,
        as the config writes them, so the params Snakemake records do not change."""
        return {column: list(values) for column, values in self.datasets[dataset].rows.items()}

    def skipped_dataset_lines(self) -> list[str]:
        """The skip line of every absent dataset, for the generated results section and the report."""
        return [dataset.message for dataset in self.absent.values()]

    def fail_for_absent(self, dataset: str) -> None:
        """An artefact of a skipped dataset cannot be built: planning stops with the dataset's line."""
        raise PlanError(self.absent[dataset].message)

    # One dataset's files.

    def applicable_settings(self, dataset: str) -> list[str]:
        return [setting.name for setting in self.settings[dataset] if setting.applicable]

    def table4_settings(self, dataset: str) -> list[str]:
        """The settings of the dataset's Table IV (the ablation)."""
        return table4_setting_names(self.settings[dataset])

    def dataset_setting_files(self, dataset: str, folder: str, extension: str) -> list[str]:
        """results/<dataset>/<folder>/<setting>.<extension> of each applicable setting, in settings order."""
        return [f"results/{dataset}/{folder}/{name}.{extension}" for name in self.applicable_settings(dataset)]

    def sim_schedules_files(self, dataset: str) -> list[str]:
        """The dataset's cached simulator schedules, or nothing where SIM is not evaluated."""
        return [f"results/{dataset}/sim_schedules.parquet"] if dataset in self.sim_datasets else []

    def sim_constants_files(self, dataset: str) -> list[str]:
        """The simulator's constants (fixed fields: scheduler, memory) where SIM is evaluated."""
        return [self.config["simulator"]["constants"]] if dataset in self.sim_datasets else []

    def observed_kind(self, dataset: str) -> str:
        """What a dataset's ground truth is, as figure legends name it: simulated data is never "measured"."""
        return "simulated" if self.datasets[dataset].is_simulated else "measured"

    def length_sweep_models(self, dataset: str) -> list[str] | None:
        """The models Fig. 2 shows for the dataset (config length_sweeps.models), or None for all."""
        return self.config.get("length_sweeps", {}).get("models", {}).get(dataset)

    def dataset_artefacts(self, dataset: str) -> list[str]:
        """The DEFAULT_ARTEFACTS an evaluated dataset supports: Fig. 10 where a setting predicts an
        unseen model, the advisor study's where the config names its file, Fig. 12 where that file
        names a single-curve transfer."""
        return [
            artefact for artefact in DEFAULT_ARTEFACTS
            if (artefact not in FIG10_ARTEFACTS or self.fig10_settings[dataset] is not None)
            and (artefact not in BCA_ARTEFACTS or dataset in self.bca_datasets)
            and (artefact not in FIG12_ARTEFACTS or dataset in self.fig12_datasets)
        ]

    def dataset_targets(self, dataset: str) -> list[str]:
        """Every artefact one dataset produces."""
        targets = [f"results/{dataset}/clean.parquet", f"results/{dataset}/cleaning_report.md"]
        if dataset in self.layout_choice_datasets:   # sweeps of layouts: the decision across them, measured
            return targets + [f"results/{dataset}/layout_choices.csv", f"results/{dataset}/layout_choices.md",
                              f"figures/{dataset}/layout_frontiers"]
        if dataset not in self.settings:  # a single-workload dataset (ShareGPT): batch-scaling figure
            return targets + [f"figures/{dataset}/fig1.pdf", f"figures/{dataset}/fig1.png"]
        targets += [f"figures/{dataset}/{artefact}" for artefact in self.dataset_artefacts(dataset)]
        targets += [f"results/{dataset}/table3.csv", f"results/{dataset}/headline_check.txt"]
        if dataset in self.slo_prediction_datasets:
            targets += [f"results/{dataset}/slo_predictions.csv", f"results/{dataset}/slo_accuracy.md",
                        f"figures/{dataset}/frontiers.pdf"]
        if dataset in self.sensitivity_datasets:
            targets += [f"results/{dataset}/baseline_sensitivity.csv", f"results/{dataset}/baseline_sensitivity.html"]
        if dataset in self.bca_datasets:
            targets += [f"results/{dataset}/table6.md", f"results/{dataset}/table_advisors.md"]
        return targets

    # The run's targets (rule all) and the results pages.

    def all_targets(self) -> list[str]:
        targets = [target for dataset in self.datasets for target in self.dataset_targets(dataset)]
        targets += ["figures/table1.tex"]
        if self.batch_scaling_datasets:
            targets += ["figures/fig1.pdf", "figures/fig1.png"]
        if "characterisation" in self.config:
            targets += ["results/modelled/characterisation.csv"]
            targets += [f"figures/fig{number}.{ext}" for number in (3, 4, 5, 6) for ext in ("pdf", "png")]
        if self.builds_generalisation:
            targets += ["figures/fig11.pdf", "figures/fig11.png", "figures/table_fig11.tex",
                        "results/generalisation/fig11_predictions.csv"]
        if self.builds_simulator_validation:
            targets += ["figures/table_sim_validation.tex", "figures/sim_validation.png"]
        if self.default_dataset in self.settings:
            targets += [f"figures/{artefact}" for artefact in self.dataset_artefacts(self.default_dataset)]
            targets += ["results/readme_results.md", "results/readme_headline.md"]
        return targets

    def default_artefact_source(self, artefact: str) -> str:
        return f"figures/{self.default_dataset}/{artefact}"

    def results_order(self) -> list[str]:
        """The evaluated datasets in the order the results pages show them: the default first."""
        return [self.default_dataset] + [name for name in self.evaluated_datasets if name != self.default_dataset]

    def readme_summaries(self) -> list[str]:
        """Markdown tables of docs/results.md: Table III (and SIM's constants) of every evaluated dataset
        (default first), the baselines' readings, then Table VI and the advisor comparison of every
        real one, Fig. 11's table where it is built, and the layout decision measured on each dataset
        of layout_choices."""
        ordered = self.results_order()
        summaries = []
        for name in ordered:
            if name in self.settings:
                summaries.append(f"results/{name}/table3.md")
            if name in self.sim_datasets:
                summaries.append(f"results/{name}/sim_constants.md")
            if name in self.slo_prediction_datasets:
                summaries.append(f"results/{name}/slo_accuracy.md")
        # "Why the headline differs": the baselines' readings on every evaluated dataset.
        summaries += [f"results/{name}/baseline_sensitivity.md" for name in ordered
                      if name in self.sensitivity_datasets]
        for name in ordered:
            if name in self.bca_datasets and not self.datasets[name].is_simulated:
                summaries += [f"results/{name}/table6.md", f"results/{name}/table_advisors.md"]
        if self.builds_generalisation:
            summaries.append("results/generalisation/table_fig11.md")
        summaries += [f"results/{name}/layout_choices.md" for name in self.layout_choice_datasets]
        return summaries

    def headline_tables(self) -> dict[str, list[str]]:
        """Table III's MAPEs and the reduction headline of every evaluated dataset, in results order,
        and Table VI of those with an advisor study."""
        ordered = self.results_order()
        return {
            "mapes": [f"results/{name}/table3.csv" for name in ordered],
            "reductions": [f"results/{name}/mape_reduction.csv" for name in ordered],
            "profiling_costs": [f"results/{name}/table6.csv" for name in ordered if name in self.bca_datasets],
        }

    def headline_labels(self) -> list[str]:
        """The headline's column labels, one per dataset of `headline_tables`."""
        return [self.datasets[name].label for name in self.results_order()]

    def headline_profiled(self) -> list[bool]:
        """Per dataset of `headline_tables`: whether it has an advisor study (a Table VI)."""
        return [name in self.bca_datasets for name in self.results_order()]

    def recorded_headline_tables(self) -> list[str]:
        """The table3.csv of every evaluated dataset, in evaluated order (record_headlines)."""
        return [f"results/{name}/table3.csv" for name in self.evaluated_datasets]

    # Fig. 1 over several datasets (config batch_scaling) and Fig. 11 (config generalisation).

    def batch_scaling_runs_files(self) -> list[str]:
        """Fig. 1's per-run tables, one per figure row."""
        return [f"results/{name}/runs.parquet" for name in self.batch_scaling_datasets]

    def batch_scaling_labels(self) -> list[str]:
        return [self.datasets[name].label for name in self.batch_scaling_datasets]

    def batch_scaling_output_lens(self) -> list[int | None]:
        """The nominal output length each row is shown at (None: the whole dataset)."""
        output_lens = self.config.get("batch_scaling", {}).get("output_len", {})
        return [output_lens.get(name) for name in self.batch_scaling_datasets]

    @cached_property
    def generalisation(self) -> GeneralisationInputs:
        """Input functions of the Fig. 11 rules; they check config `generalisation` when planned."""
        return GeneralisationInputs(self.config, self.datasets)

    def simulator_calibration_hardware(self) -> str:
        """The accelerator of the real dataset the simulator is calibrated on."""
        return self.datasets[self.config["simulator"]["calibration_dataset"]].hardware.name

    # The cross-accelerator table (config cross_accelerator.datasets, rules in accelerators.smk).

    @property
    def cross_accelerator_configured(self) -> list[str]:
        return list(self.config.get("cross_accelerator", {}).get("datasets", []))

    def cross_accelerator_datasets(self) -> list[str]:
        """The configured per-accelerator datasets this run builds, in config order; `PlanError` where
        none is (run_datasets lacks them, or their traces are absent) or they differ in settings file."""
        configured = self.cross_accelerator_configured
        chosen = [name for name in configured if name in self.settings]
        if not chosen:
            absent = [self.absent[name].message for name in configured if name in self.absent]
            raise PlanError(
                "the cross-accelerator table needs the datasets of cross_accelerator.datasets "
                f"({', '.join(configured) or 'none configured'}) in run_datasets, with settings: "
                + ACCELERATORS_COMMAND + "".join(f"\n{line}" for line in absent)
            )
        settings_files = {str(self.datasets[name].settings_file) for name in chosen}
        if len(settings_files) > 1:
            raise PlanError(f"cross_accelerator.datasets must share one settings file (they use "
                            f"{sorted(settings_files)})")
        return chosen

    def cross_accelerator_advised(self) -> list[str]:
        """The per-accelerator datasets this run builds that configure the advisor (datasets.<name>.bca)."""
        return [name for name in self.cross_accelerator_datasets() if name in self.bca_datasets]

    def cross_accelerator_files(self, pattern: str, advised_only: bool = False) -> list[str]:
        """`pattern` (with {name}) for each per-accelerator dataset, or each that configures the advisor."""
        names = self.cross_accelerator_advised() if advised_only else self.cross_accelerator_datasets()
        return [pattern.format(name=name) for name in names]

    def accelerator_name(self, dataset: str) -> str:
        """A dataset's accelerator as the hardware catalog shows it."""
        hardware = self.datasets[dataset].hardware
        return hardware.display_name or hardware.name

    def cross_accelerator_names(self, advised_only: bool = False) -> list[str]:
        """Each per-accelerator dataset's accelerator (or each that configures the advisor)."""
        names = self.cross_accelerator_advised() if advised_only else self.cross_accelerator_datasets()
        return [self.accelerator_name(name) for name in names]

    def cross_accelerator_settings(self) -> str:
        """The settings file the per-accelerator datasets share."""
        return str(self.datasets[self.cross_accelerator_datasets()[0]].settings_file)

    def cross_accelerator_files_per_dataset(self) -> list[int]:
        """How many of the figure's evaluation files belong to each per-accelerator dataset, in order."""
        return [len(self.applicable_settings(name)) for name in self.cross_accelerator_datasets()]

    def cross_accelerator_evaluation_files(self) -> list[str]:
        """Every applicable setting's predictions of every per-accelerator dataset, dataset by dataset."""
        return [file for name in self.cross_accelerator_datasets()
                for file in self.dataset_setting_files(name, "evaluation", "parquet")]

    def cross_accelerator_targets(self) -> list[str]:
        """Every per-accelerator artefact: each dataset's own, then the cross-accelerator table and figure."""
        targets = [target for name in self.cross_accelerator_datasets() for target in self.dataset_targets(name)]
        return targets + list(CROSS_ACCELERATOR_ARTEFACTS)

    # The simulator's accuracy beyond the paper (rules in beyond_paper.smk).

    def beyond_paper_datasets(self) -> dict[str, list[str]]:
        """The datasets of config beyond_paper.datasets this run builds, each with the models it
        scores (empty: every model of its usable runs); `PlanError` where none is built, or where one
        is not in run_datasets at all (a partial table would replace the whole one: the overlay adds them)."""
        listed = self.config.get("beyond_paper", {}).get("datasets", {})
        chosen = {name: list(models or []) for name, models in listed.items() if name in self.datasets}
        outside = [name for name in listed if name not in self.datasets and name not in self.absent]
        if outside:
            raise PlanError(f"the accuracy beyond the paper needs {', '.join(outside)} in run_datasets: "
                            + BEYOND_PAPER_COMMAND)
        if not chosen:
            absent = [self.absent[name].message for name in listed if name in self.absent]
            raise PlanError("the accuracy beyond the paper needs the datasets of beyond_paper.datasets "
                            f"({', '.join(listed) or 'none configured'}) in run_datasets: " + BEYOND_PAPER_COMMAND
                            + "".join(f"\n{line}" for line in absent))
        return chosen

    def beyond_paper_files(self, pattern: str) -> list[str]:
        """`pattern` (with {name}) for each dataset the accuracy beyond the paper scores."""
        return [pattern.format(name=name) for name in self.beyond_paper_datasets()]

    def layout_replay_datasets(self) -> list[str]:
        """The datasets of config beyond_paper.layout_replay.slo_kinds this run builds (those of the
        accuracy beyond the paper: the replay's prior is its zero-shot prediction)."""
        listed = self.config.get("beyond_paper", {}).get("layout_replay", {}).get("slo_kinds", {})
        return [name for name in listed if name in self.beyond_paper_datasets()]

    def layout_replay_files(self, pattern: str) -> list[str]:
        return [pattern.format(name=name) for name in self.layout_replay_datasets()]

    def layout_replay_options(self) -> dict:
        """The layout replay's settings: its SLO kinds and seeds, and the tuning replay's confidence,
        tolerance and margin (config `tuning`) with tune's default efficiency floor."""
        from slim.defaults import DEFAULT_EPSILON

        replay, tuning = self.config["beyond_paper"]["layout_replay"], self.config["tuning"]
        return {"slo_kinds": replay["slo_kinds"], "seeds": int(replay["seeds"]), "epsilon": DEFAULT_EPSILON,
                "confidence": tuning["confidence"], "tolerance": tuning["tolerance"], "margin": tuning["margin"]}

    def beyond_paper_frontier_datasets(self) -> list[str]:
        """The datasets of config beyond_paper.frontiers that the accuracy beyond the paper scores in
        this run, in order."""
        scored = self.beyond_paper_datasets()
        return [name for name in self.config.get("beyond_paper", {}).get("frontiers", []) if name in scored]
