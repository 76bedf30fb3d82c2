"""The run's plan (slim/pipeline/planning.py) without Snakemake: dataset subsets and target lists for
configs with and without the simulator, an absent dataset, a dataset without settings, the advisor,
Fig. 10 and Fig. 12 subsets, the cross-accelerator lists and their errors; and `prepare_run`'s
parse-time effects (slim/pipeline/prepare.py)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from slim.errors import ConfigError, PlanError
from slim.paper.splits import HeldOutSetting
from slim.pipeline import prepare
from slim.pipeline.config import DatasetConfig, ResolvedDatasets
from slim.pipeline.planning import CROSS_ACCELERATOR_ARTEFACTS, DEFAULT_ARTEFACTS, Plan
from slim.pipeline.trace_locations import AbsentDataset
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE, load_hardware

REPO = Path(__file__).resolve().parents[1]
HARDWARE = load_hardware()
UNSEEN_MODEL = HeldOutSetting("model", "Model", train={"model": ["opt-1.3b"]}, validate={"model": ["opt-2.7b"]})
SAME_CURVE = HeldOutSetting("same_curve", "Same curve", train={"max_num_seqs": [1]}, validate={"max_num_seqs": [2]})
NOT_APPLICABLE = HeldOutSetting("input_length", "Input length", not_applicable="one input length")
SETTINGS_FILES = {  # settings file -> its held-out settings (`read_settings` below)
    "paper.yaml": [SAME_CURVE, NOT_APPLICABLE, UNSEEN_MODEL],
    "no_fig10.yaml": [SAME_CURVE],
    "bench.yaml": [SAME_CURVE, UNSEEN_MODEL],
}
BCA_FILES = {"with_fig12.yaml": ("model",), "without_fig12.yaml": ()}   # advisor file -> its fig12_transfers


def dataset(name: str, kind: str = "real", settings: str | None = "paper.yaml", bca: str | None = None,
            hardware: str | None = "h100-64gb", **entry) -> DatasetConfig:
    return DatasetConfig(name=name, kind=kind, trace_dir=Path("traces") / name,
                         hardware=HARDWARE[hardware] if hardware else None, models=("opt-1.3b", "opt-2.7b"),
                         settings_file=Path(settings) if settings else None, description=name,
                         bca_file=Path(bca) if bca else None, **entry)


def absent(name: str, source: str | None = None) -> AbsentDataset:
    return AbsentDataset(name, ((Path("nowhere") / name, "traces_root"),), source)


def plan(datasets: list[DatasetConfig], absent_datasets: list[AbsentDataset] = (), **config) -> Plan:
    """The plan of `datasets` (the first is the default) with the config sections `config`."""
    config.setdefault("default_dataset", datasets[0].name)
    resolved = ResolvedDatasets({d.name: d for d in datasets}, {a.name: a for a in absent_datasets})
    return Plan.build(config, resolved, read_settings=lambda path: SETTINGS_FILES[str(path)],
                      read_bca=lambda path: SimpleNamespace(fig12_transfers=BCA_FILES[str(path)]))


SIMULATOR = {"calibration_dataset": "real", "constants": "sim.yaml", "grid": "grid.yaml"}


@pytest.fixture()
def shipped() -> Plan:
    """The shipped config's shape: a simulated default, a real dataset with settings and an advisor
    study, a real one without settings (Fig. 1 only), with the simulator and every figure section."""
    return plan([dataset("sim", kind="simulated", bca="with_fig12.yaml"), dataset("real", bca="with_fig12.yaml"),
                 dataset("sharegpt", settings=None)],
                simulator=SIMULATOR, characterisation={}, generalisation={"dataset": "sim"},
                batch_scaling={"datasets": ["sharegpt", "sim"], "output_len": {"sim": 512}})


def test_an_evaluated_datasets_targets(shipped):
    assert shipped.dataset_targets("real") == [
        "results/real/clean.parquet", "results/real/cleaning_report.md",
        *(f"figures/real/{artefact}" for artefact in DEFAULT_ARTEFACTS),
        "results/real/table3.csv", "results/real/headline_check.txt",
        "results/real/baseline_sensitivity.csv", "results/real/baseline_sensitivity.html",
        "results/real/table6.md", "results/real/table_advisors.md",
    ]


def test_a_dataset_without_settings_gets_cleaning_and_its_fig1_only(shipped):
    assert shipped.dataset_targets("sharegpt") == [
        "results/sharegpt/clean.parquet", "results/sharegpt/cleaning_report.md",
        "figures/sharegpt/fig1.pdf", "figures/sharegpt/fig1.png"]
    assert shipped.evaluated_datasets == ["sim", "real"]
    assert "sharegpt" not in shipped.bca_datasets + shipped.sensitivity_datasets + shipped.results_order()


def test_all_targets_with_the_simulator_and_every_figure_section(shipped):
    targets = shipped.all_targets()
    per_dataset = [t for name in ("sim", "real", "sharegpt") for t in shipped.dataset_targets(name)]
    assert targets[:len(per_dataset)] == per_dataset
    assert targets[len(per_dataset):] == [
        "figures/table1.tex", "figures/fig1.pdf", "figures/fig1.png", "results/modelled/characterisation.csv",
        *(f"figures/fig{n}.{ext}" for n in (3, 4, 5, 6) for ext in ("pdf", "png")),
        "figures/fig11.pdf", "figures/fig11.png", "figures/table_fig11.tex",
        "results/generalisation/fig11_predictions.csv",
        "figures/table_sim_validation.tex", "figures/sim_validation.png",
        *(f"figures/{artefact}" for artefact in DEFAULT_ARTEFACTS),
        "results/readme_results.md", "results/readme_headline.md",
    ]
    assert len(targets) == len(set(targets))


def test_without_the_simulator_sim_is_nowhere():
    real_only = plan([dataset("real", bca="with_fig12.yaml"), dataset("other")])
    assert real_only.sim_datasets == []
    assert real_only.sim_schedules_files("real") == real_only.sim_constants_files("real") == []
    assert real_only.tuning_sim_schedules("real") == real_only.tuning_sim_constants() == []
    assert "results/real/sim_constants.md" not in real_only.readme_summaries()
    targets = real_only.all_targets()
    assert not [t for t in targets if "sim_validation" in t or "fig3" in t or "fig11" in t or "fig1." in t]
    assert targets[-2:] == ["results/readme_results.md", "results/readme_headline.md"]


def test_with_the_simulator_sim_is_evaluated_on_real_data_only(shipped):
    assert shipped.sim_datasets == ["real"]
    assert shipped.sim_schedules_files("real") == ["results/real/sim_schedules.parquet"]
    assert shipped.sim_constants_files("real") == ["sim.yaml"] and shipped.sim_constants_files("sim") == []
    assert shipped.tuning_sim_schedules("sim") == ["results/sim/sim_schedules.parquet"]
    assert shipped.tuning_sim_constants() == ["sim.yaml"]
    assert shipped.simulator_calibration_hardware() == "h100-64gb"


def test_an_absent_dataset_is_left_out_and_its_artefacts_fail_with_its_line():
    skipped = absent("gone", source="public-traces")
    with_absent = plan([dataset("sim", kind="simulated"), dataset("here", source="other-traces")], [skipped],
                       simulator={**SIMULATOR, "calibration_dataset": "gone"}, generalisation={"dataset": "gone"},
                       batch_scaling={"datasets": ["gone", "here"]})
    targets = with_absent.all_targets()
    assert not [t for t in targets if "gone" in t or "sim_validation" in t or "fig11" in t]
    assert with_absent.batch_scaling_datasets == ["here"]
    assert with_absent.skipped_dataset_lines() == [skipped.message]
    assert with_absent.absent_dataset_pattern == "gone"
    assert with_absent.trace_sources == ["other-traces", "public-traces"]
    with pytest.raises(PlanError, match="dataset 'gone' skipped: its real traces are not in nowhere/gone"):
        with_absent.fail_for_absent("gone")


def test_the_advisor_fig10_and_fig12_subsets():
    subsets = plan([dataset("both", bca="with_fig12.yaml"), dataset("no_fig12", bca="without_fig12.yaml"),
                    dataset("no_advisor"), dataset("no_fig10", settings="no_fig10.yaml", bca="with_fig12.yaml")])
    assert subsets.bca_datasets == ["both", "no_fig12", "no_fig10"]
    assert subsets.fig12_datasets == ["both", "no_fig10"]
    assert subsets.fig10_settings == {"both": "model", "no_fig12": "model", "no_advisor": "model", "no_fig10": None}
    bca_only = {"table5.tex", "table6.tex", "fig13.pdf", "fig13.png", "table_advisors.tex"}
    assert set(DEFAULT_ARTEFACTS) - set(subsets.dataset_artefacts("no_fig12")) == {"fig12.pdf", "fig12.png"}
    assert set(DEFAULT_ARTEFACTS) - set(subsets.dataset_artefacts("no_advisor")) == bca_only | {"fig12.pdf",
                                                                                                "fig12.png"}
    assert set(DEFAULT_ARTEFACTS) - set(subsets.dataset_artefacts("no_fig10")) == {"fig10.pdf", "fig10.png"}
    assert subsets.tuning_files("results/{name}/x.csv") == [f"results/{n}/x.csv" for n in subsets.bca_datasets]
    assert subsets.applicable_settings("both") == ["same_curve", "model"]
    assert subsets.dataset_setting_files("both", "fits", "json") == ["results/both/fits/same_curve.json",
                                                                     "results/both/fits/model.json"]


def test_datasets_read_from_summary_tables_have_no_baseline_readings():
    tables = plan([dataset("runs"), dataset("table", table={"hardware_map": {"A100": "a100-sxm-40gb"}})])
    assert tables.sensitivity_datasets == ["runs"]
    assert "results/table/baseline_sensitivity.csv" not in tables.dataset_targets("table")


def test_the_results_pages_put_the_default_first_and_show_real_advisor_studies():
    pages = plan([dataset("real", bca="with_fig12.yaml"), dataset("sim", kind="simulated", bca="with_fig12.yaml"),
                  dataset("other")], default_dataset="sim", simulator=SIMULATOR, generalisation={"dataset": "sim"})
    assert pages.results_order() == ["sim", "real", "other"]
    assert pages.readme_summaries() == [
        "results/sim/table3.md", "results/real/table3.md", "results/real/sim_constants.md",
        "results/other/table3.md", "results/other/sim_constants.md",
        "results/sim/baseline_sensitivity.md", "results/real/baseline_sensitivity.md",
        "results/other/baseline_sensitivity.md",
        "results/real/table6.md", "results/real/table_advisors.md",
        "results/generalisation/table_fig11.md",
    ]
    assert pages.headline_tables() == {
        "mapes": ["results/sim/table3.csv", "results/real/table3.csv", "results/other/table3.csv"],
        "reductions": ["results/sim/mape_reduction.csv", "results/real/mape_reduction.csv",
                       "results/other/mape_reduction.csv"],
        "profiling_costs": ["results/sim/table6.csv", "results/real/table6.csv"],
    }
    assert pages.headline_labels() == ["sim (simulated)", "real", "other (real)"]
    assert pages.headline_profiled() == [True, True, False]
    assert pages.recorded_headline_tables() == ["results/real/table3.csv", "results/sim/table3.csv",
                                                "results/other/table3.csv"]


def test_batch_scaling_rows_follow_the_config_and_keep_their_output_lengths(shipped):
    assert shipped.batch_scaling_runs_files() == ["results/sharegpt/runs.parquet", "results/sim/runs.parquet"]
    assert shipped.batch_scaling_labels() == ["sharegpt (real)", "sim (simulated)"]
    assert shipped.batch_scaling_output_lens() == [None, 512]


def test_ingest_reads_the_simulators_folder_or_the_trace_manifest_and_rows_stay_lists(shipped):
    assert shipped.ingest_traces("sim") == "traces/sim"
    assert shipped.ingest_traces("real") == "results/real/trace_manifest.tsv"
    assert shipped.real_datasets == ["real", "sharegpt"]
    rows = plan([dataset("a100", rows={"hardware": ("a100-sxm-40gb",)})]).dataset_rows("a100")
    assert rows == {"hardware": ["a100-sxm-40gb"]} and isinstance(rows["hardware"], list)
    assert shipped.dataset_rows("real") == {}


def test_rule_names_and_wildcard_patterns():
    assert Plan.rule_name("evaluate", "llm-inference-bench.a100") == "evaluate_llm_inference_bench_a100"
    patterns = plan([dataset("a.b"), dataset("c")])
    assert patterns.dataset_pattern == r"a\.b|c"
    assert "table3\\.tex" in patterns.default_artefact_pattern.split("|")


ACCELERATORS = ["a100", "h100", "mi250"]


def _accelerator_plan(**changes) -> Plan:
    entries = {name: dataset(f"bench-{name}", settings="bench.yaml", hardware=hardware, bca="without_fig12.yaml")
               for name, hardware in zip(ACCELERATORS, ("a100-sxm-40gb", "h100-sxm-80gb", "mi250-gcd"))}
    entries.update(changes)
    return plan([dataset("sim", kind="simulated"), *[d for d in entries.values() if d is not None]],
                [absent("bench-mi250")] if entries.get("mi250") is None else [],
                cross_accelerator={"datasets": [f"bench-{name}" for name in ACCELERATORS]})


def test_the_cross_accelerator_lists():
    accelerators = _accelerator_plan(h100=dataset("bench-h100", settings="bench.yaml", hardware="h100-sxm-80gb"))
    names = ["bench-a100", "bench-h100", "bench-mi250"]
    assert accelerators.cross_accelerator_datasets() == names
    assert accelerators.cross_accelerator_advised() == ["bench-a100", "bench-mi250"]
    assert accelerators.cross_accelerator_files("results/{name}/table3.csv") == [f"results/{n}/table3.csv"
                                                                                for n in names]
    assert accelerators.cross_accelerator_files("{name}", advised_only=True) == ["bench-a100", "bench-mi250"]
    displayed = [HARDWARE[key].display_name or key for key in ("a100-sxm-40gb", "h100-sxm-80gb", "mi250-gcd")]
    assert accelerators.cross_accelerator_names() == displayed
    assert accelerators.cross_accelerator_names(advised_only=True) == [displayed[0], displayed[2]]
    assert accelerators.cross_accelerator_settings() == "bench.yaml"
    assert accelerators.cross_accelerator_files_per_dataset() == [2, 2, 2]
    assert accelerators.cross_accelerator_evaluation_files()[:2] == ["results/bench-a100/evaluation/same_curve.parquet",
                                                                     "results/bench-a100/evaluation/model.parquet"]
    targets = accelerators.cross_accelerator_targets()
    assert targets[-len(CROSS_ACCELERATOR_ARTEFACTS):] == list(CROSS_ACCELERATOR_ARTEFACTS)
    assert targets[:len(targets) - len(CROSS_ACCELERATOR_ARTEFACTS)] == [
        t for name in names for t in accelerators.dataset_targets(name)]


def test_a_missing_cross_accelerator_dataset_is_left_out_and_none_at_all_is_an_error():
    assert _accelerator_plan(mi250=None).cross_accelerator_datasets() == ["bench-a100", "bench-h100"]
    none_built = plan([dataset("sim", kind="simulated")], [absent("bench-a100")],
                      cross_accelerator={"datasets": ["bench-a100", "bench-h100"]})
    assert none_built.all_targets()       # everything else still plans: the error waits for the target
    with pytest.raises(PlanError, match=r"\(bench-a100, bench-h100\) in run_datasets, with settings: "
                                        r"snakemake --cores 2 accelerators") as raised:
        none_built.cross_accelerator_targets()
    assert str(raised.value).splitlines()[1] == absent("bench-a100").message
    with pytest.raises(PlanError, match="none configured"):
        plan([dataset("sim", kind="simulated")]).cross_accelerator_datasets()


def test_cross_accelerator_datasets_must_share_one_settings_file():
    mixed = _accelerator_plan(h100=dataset("bench-h100", settings="paper.yaml", hardware="h100-sxm-80gb"))
    with pytest.raises(PlanError, match=r"must share one settings file \(they use \['bench.yaml', 'paper.yaml'\]\)"):
        mixed.cross_accelerator_names()


def test_build_reads_the_shipped_settings_and_advisor_files():
    shipped_files = dataset("simulated", kind="simulated", settings=str(REPO / "config/settings/paper.yaml"),
                            bca=str(REPO / "config/bca/simulated.yaml"))
    bench = dataset("bench", settings=str(REPO / "config/settings/llm-inference-bench.yaml"),
                    bca=str(REPO / "config/bca/llm-inference-bench.yaml"), hardware="a100-sxm-40gb")
    built = Plan.build({"default_dataset": "simulated"}, ResolvedDatasets({"simulated": shipped_files,
                                                                           "bench": bench}, {}))
    assert built.fig12_datasets == ["simulated"] and built.bca_datasets == ["simulated", "bench"]
    assert built.fig10_settings["simulated"] is not None
    assert built.table4_settings("simulated")


# prepare_run: the workflow's parse-time effects.

@pytest.fixture()
def run_config(tmp_path, monkeypatch) -> dict:
    """The shipped config with one small real dataset (a layout fixture) and one absent one, read from
    a working folder of its own (the manifests go to its results/)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLIM_TRACES_ROOT", raising=False)
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for section in ("characterisation", "simulator", "generalisation", "batch_scaling", "length_sweeps",
                    "cross_accelerator"):
        raw.pop(section, None)
    raw["run_datasets"], raw["default_dataset"] = ["mine", "h100-public"], "mine"
    raw["traces_root"] = str(tmp_path / "no_traces_here")
    raw["datasets"]["mine"] = {"kind": "real", "trace_dir": str(REPO / "tests/data/formats/bench_serve_metadata"),
                               "hardware": "h100-64gb", "models": ["opt-1.3b"], "source": "vllm-h100-public"}
    raw["models_file"], raw["hardware_file"] = str(MODELS_FILE), str(HARDWARE_FILE)
    return raw


def test_prepare_run_has_each_effect_its_docstring_lists(run_config, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)
    del run_config["models_file"]
    prepared = prepare.prepare_run(run_config)
    assert (os.environ["OPENBLAS_NUM_THREADS"], os.environ["MKL_NUM_THREADS"]) == ("1", "1")
    assert os.environ["OMP_NUM_THREADS"] == "3"                       # an exported value wins
    assert Path(run_config["models_file"]).resolve() == MODELS_FILE.resolve()
    skip_line = prepared.absent["h100-public"].message
    assert capsys.readouterr().err == skip_line + "\n"
    assert run_config["skipped_datasets"] == {"h100-public": skip_line}
    manifest = tmp_path / "results" / "mine" / "trace_manifest.tsv"
    assert manifest.read_text().startswith("path\tsize\tmode\tmtime_ns\n")
    os.utime(manifest, ns=(1, 1))
    prepare.prepare_run(run_config)
    assert manifest.stat().st_mtime_ns == 1                          # unchanged traces: not rewritten
    assert list(prepared.datasets) == ["mine"] and prepared.all_targets()[:2] == [
        "results/mine/clean.parquet", "results/mine/cleaning_report.md"]
    mine = prepared.datasets["mine"]     # the typed entry carries what the rules used to read raw
    assert (mine.source, mine.hardware_key, mine.table, mine.reads_summary_tables) == (
        "vllm-h100-public", "h100-64gb", None, False)


def test_fetch_auto_fetches_what_is_missing_then_looks_again(run_config, monkeypatch, capsys, tmp_path):
    run_config["fetch"].update(auto=True, timeout_s=5, attempts=1)
    fetched = []

    def fake_fetch(source, destination, timeout_s, attempts):
        fetched.append((source.name, str(destination), timeout_s, attempts))
        raise ConfigError("offline")

    monkeypatch.setattr(prepare, "fetch_source", fake_fetch)
    with pytest.raises(ConfigError, match="offline"):
        prepare.prepare_run(run_config)
    assert fetched == [("vllm-h100-public", "raw_traces/fetched/vllm-h100-public", 5, 1)]
    assert capsys.readouterr().err == ("fetch.auto: fetching trace source 'vllm-h100-public' into "
                                       "raw_traces/fetched\n")
