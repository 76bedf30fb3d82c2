localrules:
    record_headlines,
    default_artefact,
    readme_results,
    readme_headline,


# Not part of `all`: re-records config/headlines.yaml from the current tables, on request
# (`snakemake --cores 2 record_headlines`); the copy under results/ is the rule's output.
rule record_headlines:
    input:
        mapes=PLAN.recorded_headline_tables(),
    output:
        recorded="results/headlines_recorded.yaml",
    params:
        datasets=PLAN.evaluated_datasets,
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
        artefact=PLAN.default_artefact_pattern,
    log:
        "logs/default_artefact/{artefact}.log",
    conda:
        "../../environment.yml"
    shell:
        "cp {input} {output} 2> {log}"


rule readme_results:
    input:
        summaries=PLAN.readme_summaries(),
    output:
        "results/readme_results.md",
    params:
        skipped=PLAN.skipped_dataset_lines(),
    log:
        "logs/readme_results.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/readme_results.py"


rule readme_headline:
    input:
        **PLAN.headline_tables(),
        paper_settings="config/settings/paper.yaml",
        reference="config/paper_reference.yaml",
    output:
        "results/readme_headline.md",
    params:
        labels=PLAN.headline_labels(),
        profiled=PLAN.headline_profiled(),
    log:
        "logs/readme_headline.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/readme_headline.py"
