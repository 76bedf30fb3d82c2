# The cross-accelerator table and figure: the datasets of config
# `cross_accelerator.datasets` that this run builds (config/accelerators.yaml adds them to
# run_datasets), each evaluated on the same settings file.


localrules:
    accelerators,
    cross_accelerator_table,


rule cross_accelerator_table:
    input:
        tables=cross_accelerator_files("results/{name}/table3.csv"),
        settings=cross_accelerator_settings,
        advisors=cross_accelerator_files("results/{name}/table_advisors.csv", advised_only=True),
        profiling_cost=cross_accelerator_files("results/{name}/table6.csv", advised_only=True),
    output:
        table="results/accelerators/cross_accelerator.csv",
        advisors="results/accelerators/advisors.csv",
        summary="results/accelerators/cross_accelerator.md",
        html=report(
            "figures/accelerators/cross_accelerator.html",
            caption="../report/cross_accelerator.rst",
            category="Held-out accuracy per accelerator",
        ),
    params:
        datasets=cross_accelerator_datasets,
        accelerators=cross_accelerator_names,
        advised_accelerators=cross_accelerator_advised_names,
    log:
        "logs/accelerators/cross_accelerator_table.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/cross_accelerator_table.py"


rule cross_accelerator_figure:
    input:
        predictions=cross_accelerator_evaluation_files,
    output:
        pdf="figures/accelerators/measured_vs_predicted.pdf",
        png=report(
            "figures/accelerators/measured_vs_predicted.png",
            caption="../report/cross_accelerator_figure.rst",
            category="Held-out accuracy per accelerator",
        ),
    params:
        accelerators=cross_accelerator_names,
        files_per_accelerator=cross_accelerator_files_per_dataset,
    log:
        "logs/accelerators/cross_accelerator_figure.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/cross_accelerator_figure.py"


# Every per-accelerator artefact: each dataset's own (Table III with intervals, ...) and the
# cross-accelerator table and figure.
rule accelerators:
    input:
        cross_accelerator_targets,
