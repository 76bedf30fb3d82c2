localrules:
    record_headlines,
    default_artefact,
    readme_results,
    readme_headline,


# Not part of `all`: re-records config/headlines.yaml from the current tables, on request
# (`snakemake --cores 2 record_headlines`); the copy under results/ is the rule's output.
rule record_headlines:
    input:
        mapes=recorded_headline_tables,
    output:
        recorded="results/headlines_recorded.yaml",
    params:
        datasets=EVALUATED_DATASETS,
        record="config/headlines.yaml",
    log:
        "logs/record_headlines.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/record_headlines.py"


rule default_artefact:
    input:
        default_artefact_source,
    output:
        "figures/{artefact}",
    wildcard_constraints:
        artefact=DEFAULT_ARTEFACT_PATTERN,
    log:
        "logs/default_artefact/{artefact}.log",
    conda:
        "../../environment.yml"
    shell:
        "cp {input} {output} 2> {log}"


rule readme_results:
    input:
        summaries=readme_summaries,
    output:
        "results/readme_results.md",
    params:
        skipped=skipped_dataset_lines,
    log:
        "logs/readme_results.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/readme_results.py"


rule readme_headline:
    input:
        unpack(headline_tables),
        paper_settings="config/settings/paper.yaml",
        reference="config/paper_reference.yaml",
    output:
        "results/readme_headline.md",
    params:
        labels=headline_labels,
        profiled=headline_profiled,
    log:
        "logs/readme_headline.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/readme_headline.py"
