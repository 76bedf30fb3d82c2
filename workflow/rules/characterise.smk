# Characterisation artefacts (paper Section V): Fig. 1 and Table I (Fig. 2 is drawn with each
# dataset's figures, figures.smk).
# Fig. 1's rows over several datasets come from the run's plan (PLAN.batch_scaling_*).


localrules:
    fig1,
    fig1_datasets,
    table1,


rule fig1:
    input:
        runs=["results/{dataset}/runs.parquet"],
    output:
        pdf=report(
            "figures/{dataset}/fig1.pdf",
            caption="../report/fig1.rst",
            category="Characterisation",
        ),
        png="figures/{dataset}/fig1.png",
    params:
        dataset_labels=dataset_labels,
        output_lens=[None],
    log:
        "logs/{dataset}/fig1.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/plot_fig1.py"


rule fig1_datasets:
    input:
        runs=PLAN.batch_scaling_runs_files(),
    output:
        pdf=report("figures/fig1.pdf", caption="../report/fig1_datasets.rst", category="Characterisation"),
        png="figures/fig1.png",
    params:
        dataset_labels=PLAN.batch_scaling_labels(),
        output_lens=PLAN.batch_scaling_output_lens(),
    log:
        "logs/fig1.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/plot_fig1.py"


rule table1:
    input:
        paper="config/paper_table1.yaml",
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        tex="figures/table1.tex",
        html=report("figures/table1.html", caption="../report/table1.rst", category="Characterisation"),
        csv="results/table1.csv",
    log:
        "logs/table1.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/table1.py"
