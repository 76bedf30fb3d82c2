# The public traces, fetched from their source and verified (slim.traces.fetch). Nothing here runs
# unless asked for: `snakemake --cores 2 fetch_traces`.
localrules:
    fetch_traces,
    fetch_trace_source,


rule fetch_traces:
    input:
        expand(f"{PLAN.trace_cache}/{{source}}", source=PLAN.trace_sources),


# One source: its archive at a fixed commit, exactly the checksum manifest's files extracted and
# verified; the folder appears only when complete, and a rerun resumes an interrupted download.
rule fetch_trace_source:
    input:
        checksums=trace_source_checksums,
    output:
        traces=directory(f"{PLAN.trace_cache}/{{source}}"),
    params:
        source=trace_source_entry,
        timeout_s=config["fetch"]["timeout_s"],
        attempts=config["fetch"]["attempts"],
    log:
        "logs/fetch/{source}.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/fetch_traces.py"


# An artefact of a dataset skipped for want of its traces: planning stops with the dataset's line.
if PLAN.absent:

    rule absent_dataset:
        input:
            absent_dataset_input,
        output:
            "{area}/{absent_dataset}/{absent_path}",
        wildcard_constraints:
            area="results|figures",
            absent_dataset=PLAN.absent_dataset_pattern,
            absent_path=".+",
        log:
            "logs/{area}/{absent_dataset}/{absent_path}.absent.log",
        shell:
            "exit 1"
