# The simulator's accuracy on the models beyond the paper's dense 16-bit formula (slim.paper.beyond_paper):
# the datasets of config `beyond_paper.datasets` that this run builds (config/beyond_paper.yaml adds
# them to run_datasets), every curve zero-shot and calibrated on 3 of its runs.


localrules:
    beyond_paper,
    beyond_paper_frontiers,


rule beyond_paper_accuracy:
    input:
        clean=lambda wildcards: PLAN.beyond_paper_files("results/{name}/clean.parquet"),
        models=config["models_file"],
        hardware=config["hardware_file"],
        constants=str(SIM_CONSTANTS_FILE),
    output:
        predictions="results/beyond_paper/predictions.csv",
        curves="results/beyond_paper/curves.csv",
        accuracy="results/beyond_paper/accuracy.csv",
        summary="results/beyond_paper/accuracy.md",
    params:
        datasets=lambda wildcards: list(PLAN.beyond_paper_datasets()),
        models=lambda wildcards: list(PLAN.beyond_paper_datasets().values()),
        labels=lambda wildcards: [PLAN.datasets[name].label for name in PLAN.beyond_paper_datasets()],
    log:
        "logs/beyond_paper/accuracy.log",
    benchmark:
        "benchmarks/beyond_paper/accuracy.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../../environment.yml"
    script:
        "../scripts/beyond_paper_accuracy.py"


# The layout decision replayed on the datasets of config beyond_paper.layout_replay (slim.paper.replay.layouts):
# every way of searching (layout, cap) against the exhaustive sweep, tune's prior the accuracy rule's
# zero-shot predictions.
rule layout_replay:
    input:
        clean=layout_replay_clean,
        predictions=rules.beyond_paper_accuracy.output.predictions,
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        layouts="results/beyond_paper/layout_replay.csv",
        caps="results/beyond_paper/layout_cap_replay.csv",
        goals="results/beyond_paper/layout_goals.csv",
        summary="results/beyond_paper/layout_replay.md",
    params:
        datasets=layout_replay_datasets,
        labels=layout_replay_labels,
        options=layout_replay_options,
    log:
        "logs/beyond_paper/layout_replay.log",
    benchmark:
        "benchmarks/beyond_paper/layout_replay.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../../environment.yml"
    script:
        "../scripts/layout_replay.py"


# The per-GPU frontier of each cell (model as served, input and output length) of the datasets of config
# `beyond_paper.frontiers` with runs at several layouts: one curve per layout (slim.paper.figures.
# layout_frontier), measured, and the accuracy's zero-shot prediction of each run (no simulation here).


rule beyond_paper_frontiers:
    input:
        clean=beyond_paper_frontier_clean,
        predictions=rules.beyond_paper_accuracy.output.predictions,
    output:
        frontiers=report(
            directory("results/beyond_paper/frontiers"),
            patterns=["{cell}.png"],
            caption="../report/beyond_paper_frontiers.rst",
            category="Beyond the paper",
        ),
    params:
        datasets=beyond_paper_frontier_datasets,
    log:
        "logs/beyond_paper/frontiers.log",
    benchmark:
        "benchmarks/beyond_paper/frontiers.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/beyond_paper_frontiers.py"


rule beyond_paper:
    input:
        lambda wildcards: PLAN.beyond_paper_files("results/{name}/cleaning_report.md"),
        rules.beyond_paper_accuracy.output,
        rules.layout_replay.output,
        rules.beyond_paper_frontiers.output,
