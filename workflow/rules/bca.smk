# The advisor study of one dataset, in one job: Tables V and VI, the advisor comparison on every
# curve, Fig. 13 and, where the advisor config names a single-curve transfer, Fig. 12. They read
# the same inputs, and each paid about 1.3 CPU-s of start-up and imports as a job of its own.
# Fitting SLIM per target (Tables V-VI, Fig. 12) and leave-one-curve-out (the advisor comparison)
# make it a cluster job; on real datasets the simulator's cached schedules add SIM-BCA beside
# SLIM-BCA. Fig. 12 exists only for some datasets, so the rule is defined once per dataset;
# the dataset lists come from the run's plan (PLAN, slim.pipeline.planning).
for studied_dataset in PLAN.bca_datasets:

    rule:
        name:
            PLAN.rule_name("bca_study", studied_dataset)
        input:
            clean=f"results/{studied_dataset}/clean.parquet",
            settings=str(PLAN.datasets[studied_dataset].settings_file),
            bca_config=str(PLAN.datasets[studied_dataset].bca_file),
            models=config["models_file"],
            hardware=config["hardware_file"],
            sim_schedules=PLAN.sim_schedules_files(studied_dataset),
            sim_constants=PLAN.sim_constants_files(studied_dataset),
            reference="config/paper_reference.yaml",
        output:
            # Fig. 12 where the advisor config names a single-curve transfer (PLAN.fig12_datasets).
            **(
                {
                    "fig12_pdf": report(
                        f"figures/{studied_dataset}/fig12.pdf", caption="../report/fig12.rst", category="Advisor"
                    ),
                    "fig12_png": f"figures/{studied_dataset}/fig12.png",
                    "fig12_grid": f"results/{studied_dataset}/fig12.csv",
                    "fig12_efficiency": f"results/{studied_dataset}/fig12_efficiency.csv",
                }
                if studied_dataset in PLAN.fig12_datasets
                else {}
            ),
            table5=f"figures/{studied_dataset}/table5.tex",
            table5_html=report(
                f"figures/{studied_dataset}/table5.html", caption="../report/table5.rst", category="Advisor"
            ),
            table5_csv=f"results/{studied_dataset}/table5.csv",
            table6=f"figures/{studied_dataset}/table6.tex",
            table6_html=report(
                f"figures/{studied_dataset}/table6.html", caption="../report/table6.rst", category="Advisor"
            ),
            table6_csv=f"results/{studied_dataset}/table6.csv",
            table6_md=f"results/{studied_dataset}/table6.md",
            advisors=f"figures/{studied_dataset}/table_advisors.tex",
            advisors_html=report(
                f"figures/{studied_dataset}/table_advisors.html",
                caption="../report/table_advisors.rst",
                category="Advisor",
            ),
            advisors_csv=f"results/{studied_dataset}/table_advisors.csv",
            advisors_md=f"results/{studied_dataset}/table_advisors.md",
            fig13_pdf=report(f"figures/{studied_dataset}/fig13.pdf", caption="../report/fig13.rst", category="Advisor"),
            fig13_png=f"figures/{studied_dataset}/fig13.png",
            memory=f"results/{studied_dataset}/fig13.csv",
        params:
            dataset=studied_dataset,
            dataset_label=PLAN.datasets[studied_dataset].label,
            hardware=PLAN.datasets[studied_dataset].hardware.name,
        log:
            f"logs/{studied_dataset}/bca_study.log",
        benchmark:
            f"benchmarks/{studied_dataset}/bca_study.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60,
        conda:
            "../../environment.yml"
        script:
            "../scripts/bca_study.py"
