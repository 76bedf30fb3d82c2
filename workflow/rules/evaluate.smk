# Every held-out setting of a dataset is fitted in one job, which also writes Tables III and IV
# (with their bootstrap intervals), their check against config/headlines.yaml and the baselines' readings (baseline_sensitivity.csv, where
# the dataset has them): they read the same inputs, and one Python start-up with scikit-learn,
# SciPy and statsmodels (about 1.6 CPU-s) costs more than most settings' fits. Its outputs name
# the dataset's settings, so the rule is defined once per evaluated dataset (Snakemake's
# procedural rule definition); the dataset lists come from the run's plan (PLAN, slim.pipeline.planning).
for evaluated_dataset in PLAN.evaluated_datasets:

    rule:
        name:
            PLAN.rule_name("evaluate", evaluated_dataset)
        input:
            clean=f"results/{evaluated_dataset}/clean.parquet",
            settings=str(PLAN.datasets[evaluated_dataset].settings_file),
            models=config["models_file"],
            hardware=config["hardware_file"],
            sim_schedules=PLAN.sim_schedules_files(evaluated_dataset),
            sim_constants=PLAN.sim_constants_files(evaluated_dataset),
            reference="config/paper_reference.yaml",
            expected="config/headlines.yaml",
        output:
            # The baselines' readings where the dataset has them (PLAN.sensitivity_datasets).
            **(
                {
                    "sensitivity": f"results/{evaluated_dataset}/baseline_sensitivity.csv",
                    "sensitivity_html": report(
                        f"results/{evaluated_dataset}/baseline_sensitivity.html",
                        caption="../report/baseline_sensitivity.rst",
                        category="Held-out accuracy",
                    ),
                    "sensitivity_md": f"results/{evaluated_dataset}/baseline_sensitivity.md",
                }
                if evaluated_dataset in PLAN.sensitivity_datasets
                else {}
            ),
            predictions=PLAN.dataset_setting_files(evaluated_dataset, "evaluation", "parquet"),
            identifiability=PLAN.dataset_setting_files(evaluated_dataset, "identifiability", "parquet"),
            fits=PLAN.dataset_setting_files(evaluated_dataset, "fits", "json"),
            mapes=f"results/{evaluated_dataset}/table3.csv",
            comparisons=f"results/{evaluated_dataset}/mape_comparisons.csv",
            reduction=f"results/{evaluated_dataset}/mape_reduction.csv",
            sim_constants_table=f"results/{evaluated_dataset}/sim_constants.csv",
            sim_constants_md=f"results/{evaluated_dataset}/sim_constants.md",
            table3=f"figures/{evaluated_dataset}/table3.tex",
            table3_html=report(
                f"figures/{evaluated_dataset}/table3.html",
                caption="../report/table3.rst",
                category="Held-out accuracy",
            ),
            table3_paper=f"figures/{evaluated_dataset}/table3_paper.tex",
            table4=f"figures/{evaluated_dataset}/table4.tex",
            table4_html=report(
                f"figures/{evaluated_dataset}/table4.html",
                caption="../report/table4.rst",
                category="Held-out accuracy",
            ),
            summary=f"results/{evaluated_dataset}/table3.md",
            check=f"results/{evaluated_dataset}/headline_check.txt",
            measured=f"results/{evaluated_dataset}/headlines_measured.yaml",
        params:
            dataset=evaluated_dataset,
            dataset_label=PLAN.datasets[evaluated_dataset].label,
            settings=PLAN.applicable_settings(evaluated_dataset),
            ablation_transfers=PLAN.table4_settings(evaluated_dataset),
            hardware=PLAN.datasets[evaluated_dataset].hardware.name,
        log:
            f"logs/{evaluated_dataset}/evaluate.log",
        benchmark:
            f"benchmarks/{evaluated_dataset}/evaluate.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=30,
        conda:
            "../../environment.yml"
        script:
            "../scripts/evaluate_settings.py"
