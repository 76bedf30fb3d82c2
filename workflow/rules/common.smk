# Input functions of the rules: each passes a job's wildcards to the run's plan
# (slim.pipeline.planning.Plan), which holds the datasets, their subsets and every target list.
from slim.defaults import SIM_CONSTANTS_FILE
from slim.pipeline.prepare import prepare_run

# Parsing the workflow touches the environment, stderr and the trace manifests only here:
# prepare_run's docstring lists each effect.
PLAN = prepare_run(config)


wildcard_constraints:
    dataset=PLAN.dataset_pattern,
    setting="[a-z0-9_]+",
    artefact="[^/]+",


def absent_dataset_input(wildcards):
    """No input: an artefact of a skipped dataset cannot be built, and planning stops with its line."""
    PLAN.fail_for_absent(wildcards.absent_dataset)


def trace_source_checksums(wildcards):
    return config["trace_sources"][wildcards.source]["checksums"]


def trace_source_entry(wildcards):
    """The source's config entry (its URL and folders are params: a changed URL refetches)."""
    return config["trace_sources"][wildcards.source]


def dataset_hardware_key(wildcards):
    """The dataset's `hardware` key, or None where its table maps each row to its accelerator."""
    return PLAN.datasets[wildcards.dataset].hardware_key


def dataset_table_section(wildcards):
    """The dataset's `table` section (its summary tables' column mapping), or None."""
    return PLAN.datasets[wildcards.dataset].table


def dataset_rows(wildcards):
    return PLAN.dataset_rows(wildcards.dataset)


def trace_dir(wildcards):
    """The dataset's trace folder (read in place for real data)."""
    return str(PLAN.datasets[wildcards.dataset].trace_dir)


def ingest_traces_input(wildcards):
    return PLAN.ingest_traces(wildcards.dataset)


def simulator_calibration_hardware(wildcards):
    return PLAN.simulator_calibration_hardware()


def dataset_label(wildcards):
    """'name (real)' or 'name (simulated)': how the dataset is named in every artefact."""
    return PLAN.datasets[wildcards.dataset].label


def dataset_labels(wildcards):
    """[dataset_label]: the per-dataset Fig. 1 has one row."""
    return [dataset_label(wildcards)]


def dataset_kind(wildcards):
    """'real' or 'simulated'."""
    return "simulated" if PLAN.datasets[wildcards.dataset].is_simulated else "real"


def hardware_name(wildcards):
    return PLAN.datasets[wildcards.dataset].hardware.name


def default_artefact_source(wildcards):
    return PLAN.default_artefact_source(wildcards.artefact)


# The cross-accelerator table's: checked when its targets are planned, so a run that does not
# ask for them builds without those datasets.
def cross_accelerator_datasets(wildcards):
    return PLAN.cross_accelerator_datasets()


def cross_accelerator_files(pattern, advised_only=False):
    """An input function: `pattern` for each per-accelerator dataset (or each with an advisor config)."""
    return lambda wildcards: PLAN.cross_accelerator_files(pattern, advised_only)


def cross_accelerator_names(wildcards):
    return PLAN.cross_accelerator_names()


def cross_accelerator_advised_names(wildcards):
    return PLAN.cross_accelerator_names(advised_only=True)


def cross_accelerator_files_per_dataset(wildcards):
    return PLAN.cross_accelerator_files_per_dataset()


def cross_accelerator_settings(wildcards):
    return PLAN.cross_accelerator_settings()


def cross_accelerator_evaluation_files(wildcards):
    return PLAN.cross_accelerator_evaluation_files()


def cross_accelerator_targets(wildcards):
    return PLAN.cross_accelerator_targets()


def tuning_bca_config(wildcards):
    """The dataset's advisor configuration (datasets.<name>.bca): its epsilon and SLO."""
    return str(PLAN.datasets[wildcards.dataset].bca_file)


def tuning_settings_file(wildcards):
    return PLAN.tuning_settings_files(wildcards.dataset)


def tuning_sim_schedules(wildcards):
    return PLAN.tuning_sim_schedules(wildcards.dataset)


def tuning_other_residuals(wildcards):
    return PLAN.tuning_residual_files(excluding=wildcards.dataset)


def tuning_sim_constants(wildcards):
    return PLAN.tuning_sim_constants()


def beyond_paper_frontier_datasets(wildcards):
    """The datasets whose cells get a per-GPU frontier per layout (config beyond_paper.frontiers)."""
    return PLAN.beyond_paper_frontier_datasets()


def beyond_paper_frontier_clean(wildcards):
    """The clean runs of each dataset of `beyond_paper_frontier_datasets`, in its order."""
    return [f"results/{name}/clean.parquet" for name in PLAN.beyond_paper_frontier_datasets()]


def layout_replay_clean(wildcards):
    """The clean runs of each dataset the layout replay covers (config beyond_paper.layout_replay)."""
    return PLAN.layout_replay_files("results/{name}/clean.parquet")


def layout_replay_datasets(wildcards):
    return PLAN.layout_replay_datasets()


def layout_replay_labels(wildcards):
    return [PLAN.datasets[name].label for name in PLAN.layout_replay_datasets()]


def layout_replay_options(wildcards):
    return PLAN.layout_replay_options()
