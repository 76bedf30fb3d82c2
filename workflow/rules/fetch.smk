# The public traces, fetched from their source and verified (slim.traces.fetch). Nothing here runs
# unless asked for: `snakemake --cores 2 fetch_traces`.
localrules:
    fetch_traces,
    fetch_trace_source,


rule fetch_traces:
    input:
        expand(f"{TRACE_CACHE}/{{source}}", source=TRACE_SOURCES),


# One source: its archive at a fixed commit, exactly the checksum manifest's files extracted and
# verified; the folder appears only when complete, and a rerun resumes an interrupted download.
rule fetch_trace_source:
    input:
        checksums=trace_source_checksums,
    output:
        traces=directory(f"{TRACE_CACHE}/{{source}}"),
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
if ABSENT_DATASETS:

    rule absent_dataset:
        input:
            absent_dataset_input,
        output:
            "{area}/{absent_dataset}/{absent_path}",
        wildcard_constraints:
            area="results|figures",
            absent_dataset="|".join(re.escape(name) for name in ABSENT_DATASETS),
            absent_path=".+",
        log:
            "logs/{area}/{absent_dataset}/{absent_path}.absent.log",
        shell:
            "exit 1"
