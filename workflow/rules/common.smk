# Helpers shared by the rules: resolved datasets, input functions, target lists.
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from slim.paper.advisor_study_config import load_bca_config
from slim.paper.splits import fig10_setting_name, load_settings, table4_setting_names
from slim.pipeline.config import resolve_datasets, with_catalog_defaults
from slim.pipeline.trace_locations import trace_cache
from slim.pipeline.manifest import update_trace_manifest
from slim.pipeline.snakemake_inputs import GeneralisationInputs
from slim.traces.fetch import fetch_source, trace_source

# One BLAS thread per job: Snakemake already runs up to --cores jobs at once, and OpenBLAS's
# own threads (which spin while idle) would oversubscribe the CPUs. An exported value wins.
for blas_threads_variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(blas_threads_variable, "1")

# The model and GPU catalogs default to the package's own (slim/specs/*.yaml).
with_catalog_defaults(config)
TRACE_CACHE = trace_cache(config).as_posix()
RESOLVED_DATASETS = resolve_datasets(config)
# The public trace sets `fetch_traces` downloads: those the run's datasets name as their source.
TRACE_SOURCES = sorted(
    {config["datasets"][name]["source"] for name in config["run_datasets"] if "source" in config["datasets"][name]}
)
if config["fetch"].get("auto"):
    # Asked for in the config (fetch.auto): fetch what is missing now, then look again.
    for missing_source in sorted({absent.source for absent in RESOLVED_DATASETS.absent.values() if absent.source}):
        print(f"fetch.auto: fetching trace source '{missing_source}' into {TRACE_CACHE}", file=sys.stderr)
        fetch_source(
            trace_source(missing_source, config["trace_sources"][missing_source]),
            Path(TRACE_CACHE) / missing_source,
            timeout_s=config["fetch"]["timeout_s"],
            attempts=config["fetch"]["attempts"],
        )
    RESOLVED_DATASETS = resolve_datasets(config)
DATASETS = RESOLVED_DATASETS.available
# Real datasets of run_datasets whose traces are absent (`required: false`): one line each, now,
# before any job is planned; asking for one of their artefacts fails with the same line.
ABSENT_DATASETS = RESOLVED_DATASETS.absent
for absent_dataset in ABSENT_DATASETS.values():
    print(absent_dataset.message, file=sys.stderr)
# Derived, not configuration: the report's front page (workflow/report/workflow.rst) reads it.
config["skipped_datasets"] = {name: dataset.message for name, dataset in ABSENT_DATASETS.items()}
DEFAULT_DATASET = config["default_dataset"]
SETTINGS = {
    name: load_settings(dataset.settings_file)
    for name, dataset in DATASETS.items()
    if dataset.settings_file is not None
}
EVALUATED_DATASETS = list(SETTINGS)
# Artefacts copied from figures/<default dataset>/ to the top of figures/.
DEFAULT_ARTEFACTS = [
    "table3.tex",
    "table3_paper.tex",
    "table4.tex",
    "fig9.pdf",
    "fig9.png",
    "fig10.pdf",
    "fig10.png",
    "fig2.pdf",
    "fig2.png",
    "table5.tex",
    "table6.tex",
    "fig12.pdf",
    "fig12.png",
    "fig13.pdf",
    "fig13.png",
    "table_advisors.tex",
]

# Only these names match default_artefact's figures/{artefact}, so rules writing other
# top-level figures (figures/table1.tex, figures/fig3.pdf) need no ruleorder.
DEFAULT_ARTEFACT_PATTERN = "|".join(re.escape(name) for name in DEFAULT_ARTEFACTS)


# The advisor study runs for the datasets whose config names its file (datasets.<name>.bca).
BCA_DATASETS = [name for name in SETTINGS if DATASETS[name].bca_file is not None]
BCA_ARTEFACTS = ["table5.tex", "table6.tex", "fig12.pdf", "fig12.png", "fig13.pdf", "fig13.png", "table_advisors.tex"]
# Fig. 12 where the advisor config names a single-curve transfer (its fig12_transfers).
FIG12_ARTEFACTS = ["fig12.pdf", "fig12.png"]
FIG12_DATASETS = [name for name in BCA_DATASETS if load_bca_config(DATASETS[name].bca_file).fig12_transfers]
# Fig. 10's setting per dataset, from the settings file (None: the dataset has no Fig. 10).
FIG10_SETTINGS = {name: fig10_setting_name(settings) for name, settings in SETTINGS.items()}
FIG10_ARTEFACTS = ["fig10.pdf", "fig10.png"]


wildcard_constraints:
    dataset="|".join(re.escape(name) for name in DATASETS),
    setting="[a-z0-9_]+",
    artefact="[^/]+",


def absent_dataset_input(wildcards):
    """No input: an artefact of a skipped dataset cannot be built, and planning stops with its line."""
    raise WorkflowError(ABSENT_DATASETS[wildcards.absent_dataset].message)


def skipped_dataset_lines(wildcards):
    """The skip line of every absent dataset, for the generated results section and the report."""
    return [dataset.message for dataset in ABSENT_DATASETS.values()]


def trace_source_checksums(wildcards):
    return config["trace_sources"][wildcards.source]["checksums"]


def trace_source_entry(wildcards):
    """The source's config entry (its URL and folders are params: a changed URL refetches)."""
    return config["trace_sources"][wildcards.source]


def dataset_hardware_key(wildcards):
    """The dataset's `hardware` key, or None where its table maps each row to its accelerator."""
    return config["datasets"][wildcards.dataset].get("hardware")


def dataset_table_section(wildcards):
    """The dataset's `table` section (its summary tables' column mapping), or None."""
    return config["datasets"][wildcards.dataset].get("table")


def dataset_rows(wildcards):
    """The dataset's own rows of a shared table (config datasets.<name>.rows), or {} for all."""
    return config["datasets"][wildcards.dataset].get("rows", {})


def trace_dir(wildcards):
    """The dataset's trace folder (read in place for real data)."""
    return str(DATASETS[wildcards.dataset].trace_dir)


# Real traces are read in place: ingest depends on a manifest of every trace file (path, size,
# mode, mtime), refreshed here, when the workflow is parsed and before any job is planned, and
# rewritten only when it changes, so editing or adding any trace file reruns ingest.
TRACE_MANIFESTS = {
    name: update_trace_manifest(dataset.trace_dir, f"results/{name}/trace_manifest.tsv")
    for name, dataset in DATASETS.items()
    if not dataset.is_simulated
}


def ingest_traces_input(wildcards):
    """What ingest depends on: the simulator's output folder (simulated data) or the trace manifest."""
    dataset = DATASETS[wildcards.dataset]
    return str(dataset.trace_dir) if dataset.is_simulated else TRACE_MANIFESTS[wildcards.dataset]


def simulator_calibration_hardware(wildcards):
    """The accelerator of the real dataset the simulator is calibrated on."""
    return DATASETS[config["simulator"]["calibration_dataset"]].hardware.name


def settings_file(wildcards):
    return str(DATASETS[wildcards.dataset].settings_file)


def dataset_label(wildcards):
    """'name (real)' or 'name (simulated)': how the dataset is named in every artefact."""
    return DATASETS[wildcards.dataset].label


def dataset_labels(wildcards):
    """[dataset_label]: the per-dataset Fig. 1 has one row."""
    return [dataset_label(wildcards)]


def dataset_length_sweep_models(dataset):
    """The models Fig. 2 shows for the dataset (config length_sweeps.models), or None for all."""
    return config.get("length_sweeps", {}).get("models", {}).get(dataset)


def hardware_name(wildcards):
    return DATASETS[wildcards.dataset].hardware.name


def applicable_settings(dataset):
    return [setting.name for setting in SETTINGS[dataset] if setting.applicable]


# Datasets SIM (the calibrated simulator as a held-out predictor) is evaluated on: the real
# ones, where the config has the simulator's section (its rules exist only then). On simulated
# data it would predict its own output (a circular score).
SIM_DATASETS = [name for name in SETTINGS if not DATASETS[name].is_simulated and "simulator" in config]


def dataset_observed_kind(dataset):
    """What a dataset's ground truth is, as figure legends name it: simulated data is never "measured"."""
    return "simulated" if DATASETS[dataset].is_simulated else "measured"


def dataset_sim_schedules_files(dataset):
    """The dataset's cached simulator schedules, or nothing where SIM is not evaluated."""
    return [f"results/{dataset}/sim_schedules.parquet"] if dataset in SIM_DATASETS else []


def dataset_sim_constants_files(dataset):
    """The simulator's constants (fixed fields: scheduler, memory) where SIM is evaluated."""
    return [config["simulator"]["constants"]] if dataset in SIM_DATASETS else []


NOT_IN_RULE_NAMES = re.compile(r"\W")


def dataset_rule_name(prefix, dataset):
    """`prefix`_`dataset`: the names of the rules defined once per dataset (evaluate.smk, figures.smk)."""
    return f"{prefix}_{NOT_IN_RULE_NAMES.sub('_', dataset)}"


def dataset_setting_files(dataset, folder, extension):
    """results/<dataset>/<folder>/<setting>.<extension> of each applicable setting, in settings order."""
    return [f"results/{dataset}/{folder}/{name}.{extension}" for name in applicable_settings(dataset)]


def recorded_headline_tables(wildcards):
    """The table3.csv of every evaluated dataset, in EVALUATED_DATASETS order."""
    return [f"results/{name}/table3.csv" for name in EVALUATED_DATASETS]


def default_artefact_source(wildcards):
    return f"figures/{DEFAULT_DATASET}/{wildcards.artefact}"


BATCH_SCALING = config.get("batch_scaling", {})
# Fig. 1 rows: the configured datasets this run builds, in the configured order.
BATCH_SCALING_DATASETS = [name for name in BATCH_SCALING.get("datasets", []) if name in DATASETS]


def batch_scaling_runs_files(wildcards):
    """Fig. 1's per-run tables, one per figure row."""
    return [f"results/{name}/runs.parquet" for name in BATCH_SCALING_DATASETS]


def batch_scaling_labels(wildcards):
    return [DATASETS[name].label for name in BATCH_SCALING_DATASETS]


def batch_scaling_output_lens(wildcards):
    """The nominal output length each row is shown at (None: the whole dataset)."""
    return [BATCH_SCALING.get("output_len", {}).get(name) for name in BATCH_SCALING_DATASETS]


# Input functions of the Fig. 11 rules; they check config `generalisation` when planned.
GENERALISATION = GeneralisationInputs(config, DATASETS)


# Datasets with the baselines' readings (results/<dataset>/baseline_sensitivity.csv): the evaluated ones, less those
# read from summary tables, which hold offline static batches (one latency per batch, no ITL) on
# which LLMVisor-Agg is not fitted, so its readings have nothing to show there.
SENSITIVITY_DATASETS = [name for name in SETTINGS if "table" not in config["datasets"][name]]


def results_order():
    """The evaluated datasets in the order the results pages show them: the default first."""
    return [DEFAULT_DATASET] + [name for name in EVALUATED_DATASETS if name != DEFAULT_DATASET]


def readme_summaries(wildcards):
    """Markdown tables of docs/results.md: Table III of every evaluated dataset (default first),
    then Table VI and the advisor comparison of every real one."""
    ordered = results_order()
    summaries = []
    for name in ordered:
        if name in SETTINGS:
            summaries.append(f"results/{name}/table3.md")
        if name in SIM_DATASETS:
            summaries.append(f"results/{name}/sim_constants.md")
    # "Why the headline differs": the baselines' readings on every evaluated dataset.
    summaries += [f"results/{name}/baseline_sensitivity.md" for name in ordered if name in SENSITIVITY_DATASETS]
    for name in ordered:
        if name in BCA_DATASETS and not DATASETS[name].is_simulated:
            summaries += [f"results/{name}/table6.md", f"results/{name}/table_advisors.md"]
    if config.get("generalisation", {}).get("dataset") in DATASETS:
        summaries.append("results/generalisation/table_fig11.md")
    return summaries


def headline_tables(wildcards):
    """Table III's MAPEs and the reduction headline of every evaluated dataset, in results order."""
    return {
        "mapes": [f"results/{name}/table3.csv" for name in results_order()],
        "reductions": [f"results/{name}/mape_reduction.csv" for name in results_order()],
        "profiling_costs": [f"results/{name}/table6.csv" for name in results_order() if name in BCA_DATASETS],
    }


def headline_labels(wildcards):
    """The headline's column labels, one per dataset of `headline_tables`."""
    return [DATASETS[name].label for name in results_order()]


def headline_profiled(wildcards):
    """Per dataset of `headline_tables`: whether it has an advisor study (a Table VI)."""
    return [name in BCA_DATASETS for name in results_order()]


def dataset_artefacts(dataset):
    """The DEFAULT_ARTEFACTS a dataset with settings supports: Fig. 10 where a setting predicts an
    unseen model, the advisor study's where the config names its file."""
    return [
        artefact
        for artefact in DEFAULT_ARTEFACTS
        if (artefact not in FIG10_ARTEFACTS or FIG10_SETTINGS[dataset] is not None)
        and (artefact not in BCA_ARTEFACTS or dataset in BCA_DATASETS)
        and (artefact not in FIG12_ARTEFACTS or dataset in FIG12_DATASETS)
    ]


def dataset_targets(dataset):
    """Every artefact one dataset produces."""
    targets = [f"results/{dataset}/clean.parquet", f"results/{dataset}/cleaning_report.md"]
    if dataset not in SETTINGS:  # a single-workload dataset (ShareGPT): batch-scaling figure
        targets += [f"figures/{dataset}/fig1.pdf", f"figures/{dataset}/fig1.png"]
    if dataset in SETTINGS:
        targets += [f"figures/{dataset}/{artefact}" for artefact in dataset_artefacts(dataset)]
        targets += [f"results/{dataset}/table3.csv", f"results/{dataset}/headline_check.txt"]
        if dataset in SENSITIVITY_DATASETS:
            targets += [f"results/{dataset}/baseline_sensitivity.csv", f"results/{dataset}/baseline_sensitivity.html"]
    if dataset in BCA_DATASETS:
        targets += [f"results/{dataset}/table6.md", f"results/{dataset}/table_advisors.md"]
    return targets


def all_targets():
    targets = [target for dataset in DATASETS for target in dataset_targets(dataset)]
    targets += ["figures/table1.tex"]
    if BATCH_SCALING_DATASETS:
        targets += ["figures/fig1.pdf", "figures/fig1.png"]
    if "characterisation" in config:
        targets += ["results/modelled/characterisation.csv"]
        targets += [f"figures/fig{number}.{ext}" for number in (3, 4, 5, 6) for ext in ("pdf", "png")]
    if config.get("generalisation", {}).get("dataset") in DATASETS:
        targets += [
            "figures/fig11.pdf",
            "figures/fig11.png",
            "figures/table_fig11.tex",
            "results/generalisation/fig11_predictions.csv",
        ]
    if config.get("simulator", {}).get("calibration_dataset") in DATASETS:
        targets += ["figures/table_sim_validation.tex", "figures/sim_validation.png"]
    if DEFAULT_DATASET in SETTINGS:
        targets += [f"figures/{artefact}" for artefact in dataset_artefacts(DEFAULT_DATASET)]
        targets += ["results/readme_results.md", "results/readme_headline.md"]
    return targets


# The cross-accelerator table (config cross_accelerator.datasets, rules in accelerators.smk).
CROSS_ACCELERATOR_CONFIGURED = config.get("cross_accelerator", {}).get("datasets", [])


def cross_accelerator_datasets(wildcards=None):
    """The configured per-accelerator datasets this run builds, in config order; a clear error where
    none is (run_datasets lacks them, or their traces are absent)."""
    chosen = [name for name in CROSS_ACCELERATOR_CONFIGURED if name in SETTINGS]
    if not chosen:
        absent = [ABSENT_DATASETS[name].message for name in CROSS_ACCELERATOR_CONFIGURED if name in ABSENT_DATASETS]
        raise WorkflowError(
            "the cross-accelerator table needs the datasets of cross_accelerator.datasets "
            f"({', '.join(CROSS_ACCELERATOR_CONFIGURED) or 'none configured'}) in run_datasets, with settings: "
            "snakemake --cores 2 accelerators --configfile config/config.yaml config/accelerators.yaml"
            + ("".join(f"\n{line}" for line in absent))
        )
    settings_files = {str(DATASETS[name].settings_file) for name in chosen}
    if len(settings_files) > 1:
        raise WorkflowError(
            f"cross_accelerator.datasets must share one settings file (they use {sorted(settings_files)})"
        )
    return chosen


def cross_accelerator_files(pattern, datasets=cross_accelerator_datasets):
    """`pattern` for each of `datasets()` (default: every per-accelerator dataset this run builds)."""
    return lambda wildcards: [pattern.format(name=name) for name in datasets()]


def cross_accelerator_advised(wildcards=None):
    """The per-accelerator datasets this run builds that configure the advisor (datasets.<name>.bca)."""
    return [name for name in cross_accelerator_datasets() if name in BCA_DATASETS]


def cross_accelerator_advised_names(wildcards):
    """`cross_accelerator_names` of the datasets that configure the advisor."""
    return [accelerator_name(name) for name in cross_accelerator_advised()]


def cross_accelerator_files_per_dataset(wildcards):
    """How many of the figure's evaluation files belong to each per-accelerator dataset, in order."""
    return [len(applicable_settings(name)) for name in cross_accelerator_datasets()]


def cross_accelerator_settings(wildcards):
    return str(DATASETS[cross_accelerator_datasets()[0]].settings_file)


def cross_accelerator_names(wildcards):
    """Each dataset's accelerator, as the hardware catalog names it."""
    return [accelerator_name(name) for name in cross_accelerator_datasets()]


def accelerator_name(dataset):
    """A dataset's accelerator as the hardware catalog shows it."""
    return DATASETS[dataset].hardware.display_name or DATASETS[dataset].hardware.name


def cross_accelerator_evaluation_files(wildcards):
    """Every applicable setting's predictions of every per-accelerator dataset, dataset by dataset."""
    return [
        f"results/{name}/evaluation/{setting}.parquet"
        for name in cross_accelerator_datasets()
        for setting in applicable_settings(name)
    ]


def cross_accelerator_targets(wildcards):
    targets = [target for name in cross_accelerator_datasets() for target in dataset_targets(name)]
    return targets + [
        "results/accelerators/cross_accelerator.csv",
        "results/accelerators/advisors.csv",
        "results/accelerators/cross_accelerator.md",
        "figures/accelerators/cross_accelerator.html",
        "figures/accelerators/measured_vs_predicted.pdf",
        "figures/accelerators/measured_vs_predicted.png",
    ]


# The tuning replay (rules in tuning.smk): every dataset this run builds with an advisor config.
def tuning_files(pattern):
    """`pattern` for each dataset the tuning replay covers."""
    return lambda wildcards: [pattern.format(name=name) for name in BCA_DATASETS]


def tuning_dataset_labels(wildcards):
    return [DATASETS[name].label for name in BCA_DATASETS]


def tuning_bca_config(wildcards):
    """The dataset's advisor configuration (datasets.<name>.bca): its epsilon and SLO."""
    return str(DATASETS[wildcards.dataset].bca_file)


def tuning_settings_file(wildcards):
    """The dataset's held-out settings (the paper plan's training sets), or nothing."""
    dataset = DATASETS[wildcards.dataset]
    return [str(dataset.settings_file)] if dataset.settings_file is not None else []


def tuning_sim_inputs(name):
    """SIM's schedules or constants for the replay's SIM prior, where the config has the simulator."""
    return lambda wildcards: (
        [
            (
                f"results/{wildcards.dataset}/sim_schedules.parquet"
                if name == "schedules"
                else config["simulator"]["constants"]
            )
        ]
        if "simulator" in config
        else []
    )
