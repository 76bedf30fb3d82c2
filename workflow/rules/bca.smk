localrules:
    bca_tables,
    bca_sensitivity,
    bca_memory,
    bca_advisors,


rule bca_tables:
    input:
        clean="results/{dataset}/clean.parquet",
        settings=settings_file,
        bca_config=bca_config_file,
    output:
        table5=report("figures/{dataset}/table5.tex", caption="../report/table5.rst", category="Advisor"),
        table5_csv="results/{dataset}/table5.csv",
        table6=report("figures/{dataset}/table6.tex", caption="../report/table6.rst", category="Advisor"),
        table6_csv="results/{dataset}/table6.csv",
        table6_md="results/{dataset}/table6.md",
    params:
        dataset_label=dataset_label,
        models_file=config["models_file"],
        hardware_file=config["hardware_file"],
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_tables.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_tables.py"


rule bca_sensitivity:
    input:
        clean="results/{dataset}/clean.parquet",
        settings=settings_file,
        bca_config=bca_config_file,
    output:
        pdf=report("figures/{dataset}/fig12.pdf", caption="../report/fig12.rst", category="Advisor"),
        png="figures/{dataset}/fig12.png",
        grid="results/{dataset}/fig12.csv",
    params:
        dataset_label=dataset_label,
        models_file=config["models_file"],
        hardware_file=config["hardware_file"],
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_sensitivity.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_sensitivity.py"


rule bca_memory:
    input:
        clean="results/{dataset}/clean.parquet",
        bca_config=bca_config_file,
    output:
        pdf=report("figures/{dataset}/fig13.pdf", caption="../report/fig13.rst", category="Advisor"),
        png="figures/{dataset}/fig13.png",
        memory="results/{dataset}/fig13.csv",
    params:
        dataset_label=dataset_label,
        models_file=config["models_file"],
        hardware_file=config["hardware_file"],
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_memory.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_memory.py"


rule bca_advisors:
    input:
        clean="results/{dataset}/clean.parquet",
        bca_config=bca_config_file,
    output:
        table=report(
            "figures/{dataset}/table_advisors.tex", caption="../report/table_advisors.rst", category="Advisor"
        ),
        csv="results/{dataset}/table_advisors.csv",
        md="results/{dataset}/table_advisors.md",
    params:
        dataset_label=dataset_label,
        models_file=config["models_file"],
        hardware_file=config["hardware_file"],
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_advisors.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_advisors.py"
