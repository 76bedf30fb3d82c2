rule ingest:
    input:
        traces=trace_dir,
    output:
        runs="results/{dataset}/runs.parquet",
    params:
        dataset="{dataset}",
        models_file=config["models_file"],
    log:
        "logs/{dataset}/ingest.log",
    benchmark:
        "benchmarks/{dataset}/ingest.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/ingest.py"
