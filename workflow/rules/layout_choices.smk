# The layout decision as a dataset's measurements make it (slim.paper.layout_choices): per workload
# measured at several layouts and per SLO kind of config layout_choices, the (layout, cap) of most
# tokens/s per GPU within the SLOs against the smallest layout's best, and the per-GPU frontier of each
# workload, measured runs only. Defined for the datasets of config layout_choices this run reads.


rule layout_choices:
    input:
        clean="results/{dataset}/clean.parquet",
    output:
        choices="results/{dataset}/layout_choices.csv",
        summary="results/{dataset}/layout_choices.md",
        frontiers=report(
            directory("figures/{dataset}/layout_frontiers"),
            patterns=["{cell}.png"],
            caption="../report/layout_frontiers.rst",
            category="Layouts",
        ),
    wildcard_constraints:
        dataset="|".join(PLAN.layout_choice_datasets) or "(?!)",
    params:
        dataset_label=dataset_label,
        slo_kinds=lambda wildcards: PLAN.layout_choice_kinds(wildcards.dataset),
    log:
        "logs/{dataset}/layout_choices.log",
    benchmark:
        "benchmarks/{dataset}/layout_choices.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/layout_choices.py"
