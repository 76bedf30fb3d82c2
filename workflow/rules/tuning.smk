# The tuning loop replayed on every dataset's measured curves (slim.paper.replay): each
# dataset with an advisor config (datasets.<name>.bca) that this run builds. Each real dataset's prior
# residuals are the evidence the other datasets' residual kernels are fitted on (never their own);
# tuning_kernels fits slim tune's shipped kernels on all of them. Not part of `all`;
# `snakemake --cores 2 tuning --configfile config/config.yaml config/accelerators.yaml` adds the
# LLM-Inference-Bench accelerators.


localrules:
    tuning,
    tuning_summary,
    tuning_kernels,


rule tuning_residuals:
    input:
        clean="results/{dataset}/clean.parquet",
        bca_config=tuning_bca_config,
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=tuning_sim_schedules,
        sim_constants=tuning_sim_constants,
    output:
        residuals="results/{dataset}/tuning_residuals.parquet",
    params:
        hardware=hardware_name,
        dataset_label=dataset_label,
        noise_sd=config["tuning"].get("noise_sd"),
    log:
        "logs/{dataset}/tuning_residuals.log",
    benchmark:
        "benchmarks/{dataset}/tuning_residuals.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/tuning_residuals.py"


rule tuning_kernels:
    input:
        residuals=PLAN.tuning_residual_files(),
    output:
        kernels="results/tuning/tune_kernels.yaml",
    log:
        "logs/tuning/tuning_kernels.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/tuning_kernels.py"


rule tuning_replay:
    input:
        clean="results/{dataset}/clean.parquet",
        bca_config=tuning_bca_config,
        settings=tuning_settings_file,
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=tuning_sim_schedules,
        sim_constants=tuning_sim_constants,
        other_residuals=tuning_other_residuals,
    output:
        replay="results/{dataset}/tuning_replay.csv",
        calibration="results/{dataset}/tuning_calibration.csv",
        notes="results/{dataset}/tuning_notes.txt",
    params:
        hardware=hardware_name,
        dataset_label=dataset_label,
        dataset_kind=dataset_kind,
        confidence=config["tuning"]["confidence"],
        tolerance=config["tuning"]["tolerance"],
        noise_sd=config["tuning"].get("noise_sd"),
        seeds=config["tuning"]["seeds"],
        margin=config["tuning"]["margin"],
        slo_kinds=config["tuning"]["slo_kinds"],
        adversarial=config["tuning"]["adversarial_priors"],
    log:
        "logs/{dataset}/tuning_replay.log",
    benchmark:
        "benchmarks/{dataset}/tuning_replay.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../../environment.yml"
    script:
        "../scripts/tuning_replay.py"


rule tuning_summary:
    input:
        replays=PLAN.tuning_files("results/{name}/tuning_replay.csv"),
        calibrations=PLAN.tuning_files("results/{name}/tuning_calibration.csv"),
        notes=PLAN.tuning_files("results/{name}/tuning_notes.txt"),
    output:
        csv="results/tuning/summary.csv",
        md="results/tuning/summary.md",
        headline="results/tuning/headline.md",
        pdf="figures/tuning/gpu_time_vs_regret.pdf",
        png=report(
            "figures/tuning/gpu_time_vs_regret.png",
            caption="../report/tuning.rst",
            category="Tuning",
        ),
    params:
        dataset_labels=PLAN.tuning_dataset_labels(),
        real_dataset_labels=PLAN.tuning_real_dataset_labels(),
    log:
        "logs/tuning/tuning_summary.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/tuning_summary.py"


rule tuning:
    input:
        "results/tuning/tune_kernels.yaml",
        "results/tuning/summary.csv",
        "results/tuning/summary.md",
        "results/tuning/headline.md",
        "figures/tuning/gpu_time_vs_regret.pdf",
        "figures/tuning/gpu_time_vs_regret.png",
