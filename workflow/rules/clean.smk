localrules:
    clean,


rule clean:
    input:
        runs="results/{dataset}/runs.parquet",
    output:
        clean="results/{dataset}/clean.parquet",
        report_csv="results/{dataset}/cleaning_report.csv",
        report_md="results/{dataset}/cleaning_report.md",
    params:
        dataset="{dataset}",
        keep_preempted=config["clean"]["keep_preempted"],
        rows=lambda wildcards: config["datasets"][wildcards.dataset].get("rows", {}),
    log:
        "logs/{dataset}/clean.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/clean.py"
