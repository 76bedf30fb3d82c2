localrules:
    tables,
    check_headlines,
    record_headlines,
    default_artefact,
    readme_results,


rule tables:
    input:
        predictions=evaluation_files,
        identifiability=identifiability_files,
        fits=fits_files,
        settings=settings_file,
        reference="config/paper_reference.yaml",
        clean="results/{dataset}/clean.parquet",
    output:
        mapes="results/{dataset}/table3.csv",
        comparisons="results/{dataset}/mape_comparisons.csv",
        reduction="results/{dataset}/mape_reduction.csv",
        sim_constants="results/{dataset}/sim_constants.csv",
        sim_constants_md="results/{dataset}/sim_constants.md",
        table3="figures/{dataset}/table3.tex",
        table3_html=report(
            "figures/{dataset}/table3.html", caption="../report/table3.rst", category="Held-out accuracy"
        ),
        table3_paper="figures/{dataset}/table3_paper.tex",
        table4="figures/{dataset}/table4.tex",
        table4_html=report(
            "figures/{dataset}/table4.html", caption="../report/table4.rst", category="Held-out accuracy"
        ),
        summary="results/{dataset}/table3.md",
    params:
        dataset_label=dataset_label,
        ablation_transfers=table4_settings,
    log:
        "logs/{dataset}/tables.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/tables.py"


rule check_headlines:
    input:
        mapes="results/{dataset}/table3.csv",
        comparisons="results/{dataset}/mape_comparisons.csv",
        expected="config/headlines.yaml",
    output:
        check="results/{dataset}/headline_check.txt",
        measured="results/{dataset}/headlines_measured.yaml",
    params:
        dataset="{dataset}",
    log:
        "logs/{dataset}/check_headlines.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/check_headlines.py"


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
