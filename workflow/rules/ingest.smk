rule ingest:
    input:
        traces=trace_dir,
        models=config["models_file"],
    output:
        runs="results/{dataset}/runs.parquet",
    params:
        dataset="{dataset}",
    log:
        "logs/{dataset}/ingest.log",
    benchmark:
        "benchmarks/{dataset}/ingest.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/ingest.py"
