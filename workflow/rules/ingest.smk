# Ingest and cleaning in one job: the cleaning policy only reads the runs just ingested, and a
# job of its own paid ~0.4 CPU-s to start Python with pandas for a few milliseconds of work.
rule ingest:
    input:
        traces=ingest_traces_input,
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        runs="results/{dataset}/runs.parquet",
        clean="results/{dataset}/clean.parquet",
        report_csv="results/{dataset}/cleaning_report.csv",
        report_md="results/{dataset}/cleaning_report.md",
    params:
        dataset="{dataset}",
        trace_dir=trace_dir,
        hardware=dataset_hardware_key,
        table=dataset_table_section,
        keep_preempted=config["clean"]["keep_preempted"],
        rows=dataset_rows,
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
