# The SLO metrics users state, predicted with each model left out of the calibration
# (slim.paper.slo_predictions): per run the measured and predicted values with their cross-conformal
# intervals, per metric and predictor the MAPE and coverage, and one frontier per curve for the report.
# Defined for the datasets of config slo_predictions that this run evaluates with SIM.


rule slo_predictions:
    input:
        clean="results/{dataset}/clean.parquet",
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=lambda wildcards: PLAN.sim_schedules_files(wildcards.dataset),
        sim_constants=lambda wildcards: PLAN.sim_constants_files(wildcards.dataset),
    output:
        predictions="results/{dataset}/slo_predictions.csv",
        accuracy="results/{dataset}/slo_accuracy.csv",
        accuracy_md="results/{dataset}/slo_accuracy.md",
        pdf="figures/{dataset}/frontiers.pdf",
        pngs=report(
            directory("figures/{dataset}/frontiers"),
            patterns=["{curve}.png"],
            caption="../report/frontier.rst",
            category="SLO frontiers",
        ),
    wildcard_constraints:
        dataset="|".join(PLAN.slo_prediction_datasets) or "(?!)",
    params:
        hardware=hardware_name,
        dataset_label=dataset_label,
        confidence=config.get("slo_predictions", {}).get("confidence", 0.9),
        frontier_slos=config.get("slo_predictions", {}).get("frontier_slos", ["p99_tpot_ms=2x"]),
        frontier_reference_cap=config.get("slo_predictions", {}).get("frontier_reference_cap", 1),
        frontier_predictor=config.get("slo_predictions", {}).get("frontier_predictor", "SIM"),
    log:
        "logs/{dataset}/slo_predictions.log",
    benchmark:
        "benchmarks/{dataset}/slo_predictions.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/slo_predictions.py"
