# Fitting SLIM per target (Tables V-VI, Fig. 12) and leave-one-curve-out (the advisor
# comparison) are cluster jobs; Fig. 13, which only reads the measured curves, is drawn in the
# tables' job. On real datasets the simulator's cached schedules add SIM-BCA beside SLIM-BCA.


# Tables V and VI, the advisor comparison and Fig. 13 come from one job: they read the same
# inputs, and a job of their own each cost about 1.3 CPU-s of start-up and imports.
rule bca_study:
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
        advisors="figures/{dataset}/table_advisors.tex",
        advisors_html=report(
            "figures/{dataset}/table_advisors.html", caption="../report/table_advisors.rst", category="Advisor"
        ),
        advisors_csv="results/{dataset}/table_advisors.csv",
        advisors_md="results/{dataset}/table_advisors.md",
        fig13_pdf=report("figures/{dataset}/fig13.pdf", caption="../report/fig13.rst", category="Advisor"),
        fig13_png="figures/{dataset}/fig13.png",
        memory="results/{dataset}/fig13.csv",
    params:
        dataset_label=dataset_label,
        hardware=hardware_name,
    log:
        "logs/{dataset}/bca_study.log",
    benchmark:
        "benchmarks/{dataset}/bca_study.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=45,
    conda:
        "../../environment.yml"
    script:
        "../scripts/bca_study.py"


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
