# Modelled characterisation (paper Section V, Figs. 3-6): the calibrated simulator and its
# cost model for one model on one GPU, configured by config["characterisation"].


localrules:
    modelled_fig3,
    modelled_fig4,
    modelled_fig5,
    modelled_fig6,


rule modelled_characterisation:
    input:
        constants=config["simulator"]["constants"],
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        csv="results/modelled/characterisation.csv",
    params:
        characterisation=config["characterisation"],
    log:
        "logs/modelled/characterisation.log",
    benchmark:
        "benchmarks/modelled/characterisation.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../environment.yml"
    script:
        "../scripts/modelled_characterisation.py"


rule modelled_fig3:
    input:
        table="results/modelled/characterisation.csv",
    output:
        pdf=report("figures/fig3.pdf", caption="../report/fig3.rst", category="Characterisation (modelled)"),
        png="figures/fig3.png",
    params:
        characterisation=config["characterisation"],
    log:
        "logs/modelled/fig3.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/modelled_fig3.py"


rule modelled_fig4:
    input:
        table="results/modelled/characterisation.csv",
        constants=config["simulator"]["constants"],
    output:
        pdf=report("figures/fig4.pdf", caption="../report/fig4.rst", category="Characterisation (modelled)"),
        png="figures/fig4.png",
    params:
        characterisation=config["characterisation"],
    log:
        "logs/modelled/fig4.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/modelled_fig4.py"


rule modelled_fig5:
    input:
        table="results/modelled/characterisation.csv",
    output:
        pdf=report("figures/fig5.pdf", caption="../report/fig5.rst", category="Characterisation (modelled)"),
        png="figures/fig5.png",
    params:
        characterisation=config["characterisation"],
    log:
        "logs/modelled/fig5.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/modelled_fig5.py"


rule modelled_fig6:
    input:
        table="results/modelled/characterisation.csv",
        hardware=config["hardware_file"],
        paper="config/paper_table1.yaml",
    output:
        pdf=report("figures/fig6.pdf", caption="../report/fig6.rst", category="Characterisation (modelled)"),
        png="figures/fig6.png",
    params:
        characterisation=config["characterisation"],
    log:
        "logs/modelled/fig6.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/modelled_fig6.py"
