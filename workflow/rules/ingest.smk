rule ingest:
    input:
        traces=ingest_traces_input,
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        runs="results/{dataset}/runs.parquet",
    params:
        dataset="{dataset}",
        trace_dir=trace_dir,
        hardware=dataset_hardware_key,
        table=dataset_table_section,
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
