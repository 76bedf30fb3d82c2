# Figures of one evaluated dataset, drawn in one job (starting Python with pandas and matplotlib
# costs more than drawing most of them): Fig. 9 (every held-out setting), Fig. 2 (the length
# sweeps) and, where a setting predicts an unseen model, Fig. 10. Its outputs depend on the
# dataset's settings, so the rule is defined once per evaluated dataset of the run's plan (PLAN).
for figured_dataset in PLAN.evaluated_datasets:

    rule:
        name:
            PLAN.rule_name("dataset_figures", figured_dataset)
        input:
            predictions=PLAN.dataset_setting_files(figured_dataset, "evaluation", "parquet"),
            settings=str(PLAN.datasets[figured_dataset].settings_file),
            clean=f"results/{figured_dataset}/clean.parquet",
        output:
            # Fig. 10 where a setting predicts an unseen model (PLAN.fig10_settings).
            **(
                {
                    "fig10_pdf": report(
                        f"figures/{figured_dataset}/fig10.pdf",
                        caption="../report/fig10.rst",
                        category="Held-out accuracy",
                    ),
                    "fig10_png": f"figures/{figured_dataset}/fig10.png",
                }
                if PLAN.fig10_settings[figured_dataset] is not None
                else {}
            ),
            fig9_pdf=report(
                f"figures/{figured_dataset}/fig9.pdf",
                caption="../report/fig9.rst",
                category="Held-out accuracy",
            ),
            fig9_png=f"figures/{figured_dataset}/fig9.png",
            fig2_pdf=report(
                f"figures/{figured_dataset}/fig2.pdf",
                caption="../report/fig2.rst",
                category="Characterisation",
            ),
            fig2_png=f"figures/{figured_dataset}/fig2.png",
        params:
            dataset=figured_dataset,
            dataset_label=PLAN.datasets[figured_dataset].label,
            observed=PLAN.observed_kind(figured_dataset),
            fig10_setting=PLAN.fig10_settings[figured_dataset],
            length_sweep_models=PLAN.length_sweep_models(figured_dataset),
        log:
            f"logs/{figured_dataset}/figures.log",
        localrule: True
        conda:
            "../../environment.yml"
        script:
            "../scripts/plot_dataset_figures.py"
