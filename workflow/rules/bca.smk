# Fitting SLIM per target (Tables V-VI, Fig. 12) and leave-one-curve-out (the advisor
# comparison) are cluster jobs; Fig. 13 only reads the measured curves. On real datasets the
# simulator's cached schedules add SIM-BCA beside SLIM-BCA.


localrules:
    bca_memory,


rule bca_tables:
    input:
        clean="results/{dataset}/clean.parquet",
        settings=settings_file,
        bca_config=bca_config_file,
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=sim_schedules_file,
        sim_constants=sim_constants_file,
    output:
        table5="figures/{dataset}/table5.tex",
        table5_html=report("figures/{dataset}/table5.html", caption="../report/table5.rst", category="Advisor"),
        table5_csv="results/{dataset}/table5.csv",
        table6="figures/{dataset}/table6.tex",
        table6_html=report("figures/{dataset}/table6.html", caption="../report/table6.rst", category="Advisor"),
        table6_csv="results/{dataset}/table6.csv",
        table6_md="results/{dataset}/table6.md",
    params:
        dataset_label=dataset_label,
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_tables.log",
    benchmark:
        "benchmarks/{dataset}/bca_tables.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_tables.py"


rule bca_sensitivity:
    input:
        clean="results/{dataset}/clean.parquet",
        settings=settings_file,
        bca_config=bca_config_file,
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=sim_schedules_file,
        sim_constants=sim_constants_file,
    output:
        pdf=report("figures/{dataset}/fig12.pdf", caption="../report/fig12.rst", category="Advisor"),
        png="figures/{dataset}/fig12.png",
        grid="results/{dataset}/fig12.csv",
        efficiency="results/{dataset}/fig12_efficiency.csv",
    params:
        dataset_label=dataset_label,
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_sensitivity.log",
    benchmark:
        "benchmarks/{dataset}/bca_sensitivity.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_sensitivity.py"


rule bca_memory:
    input:
        clean="results/{dataset}/clean.parquet",
        bca_config=bca_config_file,
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        pdf=report("figures/{dataset}/fig13.pdf", caption="../report/fig13.rst", category="Advisor"),
        png="figures/{dataset}/fig13.png",
        memory="results/{dataset}/fig13.csv",
    params:
        dataset_label=dataset_label,
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
        models=config["models_file"],
        hardware=config["hardware_file"],
        sim_schedules=sim_schedules_file,
        sim_constants=sim_constants_file,
    output:
        table="figures/{dataset}/table_advisors.tex",
        table_html=report(
            "figures/{dataset}/table_advisors.html", caption="../report/table_advisors.rst", category="Advisor"
        ),
        csv="results/{dataset}/table_advisors.csv",
        md="results/{dataset}/table_advisors.md",
    params:
        dataset_label=dataset_label,
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_advisors.log",
    benchmark:
        "benchmarks/{dataset}/bca_advisors.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_advisors.py"
