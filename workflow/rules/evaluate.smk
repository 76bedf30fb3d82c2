rule evaluate_setting:
    input:
        clean="results/{dataset}/clean.parquet",
        settings=settings_file,
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=sim_schedules_file,
        sim_constants=sim_constants_file,
    output:
        predictions="results/{dataset}/evaluation/{setting}.parquet",
        identifiability="results/{dataset}/identifiability/{setting}.parquet",
        fits="results/{dataset}/fits/{setting}.json",
    params:
        setting="{setting}",
        hardware=hardware_name,
    log:
        "logs/{dataset}/evaluate_{setting}.log",
    benchmark:
        "benchmarks/{dataset}/evaluate_{setting}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../environment.yml"
    script:
        "../scripts/evaluate_setting.py"
