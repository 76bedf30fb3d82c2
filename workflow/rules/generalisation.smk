# Fig. 11: SLIM fitted only on the single-GPU runs of config `generalisation.train_models`,
# predicting unseen models (GQA, tensor parallelism). The config is checked when these
# targets are planned (PLAN.generalisation, slim.pipeline.snakemake_inputs.GeneralisationInputs),
# naming the key.


rule generalisation:
    input:
        clean=PLAN.generalisation.clean_table,
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        predictions="results/generalisation/fig11_predictions.csv",
        fit="results/generalisation/fig11_fit.json",
        summary="results/generalisation/table_fig11.md",
        table="figures/table_fig11.tex",
        table_html=report(
            "figures/table_fig11.html",
            caption="../report/table_fig11.rst",
            category=PLAN.generalisation.report_category(),
        ),
        fig11_pdf=report(
            "figures/fig11.pdf",
            caption="../report/fig11.rst",
            category=PLAN.generalisation.report_category(),
        ),
        fig11_png="figures/fig11.png",
    params:
        dataset=PLAN.generalisation.dataset_name,
        dataset_label=PLAN.generalisation.dataset_label,
        train_models=PLAN.generalisation.train_models,
        target_models=PLAN.generalisation.target_models,
        hardware=PLAN.generalisation.hardware_name,
    log:
        "logs/generalisation/generalisation.log",
    benchmark:
        "benchmarks/generalisation/generalisation.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../environment.yml"
    script:
        "../scripts/generalisation.py"
