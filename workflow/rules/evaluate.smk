# Every held-out setting of a dataset is fitted in one job, and so are the baselines' readings
# (baseline_sensitivity.csv, where the dataset has them): they read the same inputs, and one
# Python start-up with scikit-learn, SciPy and statsmodels (about 1.6 CPU-s) costs more than most
# settings' fits. Its outputs name the dataset's settings, so the rule is defined once per
# evaluated dataset (Snakemake's procedural rule definition); helpers live in common.smk.
for evaluated_dataset in EVALUATED_DATASETS:

    rule:
        name:
            dataset_rule_name("evaluate", evaluated_dataset)
        input:
            **baseline_sensitivity_inputs(evaluated_dataset),
            clean=f"results/{evaluated_dataset}/clean.parquet",
            settings=str(DATASETS[evaluated_dataset].settings_file),
            models=config["models_file"],
            hardware=config["hardware_file"],
            sim_schedules=dataset_sim_schedules_files(evaluated_dataset),
            sim_constants=dataset_sim_constants_files(evaluated_dataset),
        output:
            **baseline_sensitivity_outputs(evaluated_dataset),
            predictions=dataset_setting_files(evaluated_dataset, "evaluation", "parquet"),
            identifiability=dataset_setting_files(evaluated_dataset, "identifiability", "parquet"),
            fits=dataset_setting_files(evaluated_dataset, "fits", "json"),
        params:
            dataset=evaluated_dataset,
            dataset_label=DATASETS[evaluated_dataset].label,
            settings=applicable_settings(evaluated_dataset),
            hardware=DATASETS[evaluated_dataset].hardware.name,
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
