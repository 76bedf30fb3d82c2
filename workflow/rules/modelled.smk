# Modelled characterisation (paper Section V, Figs. 3-6): the calibrated simulator and its
# cost model for one model on one GPU, configured by config["characterisation"]. One job computes
# the table and draws the four figures from it (each figure alone costs less than starting a job).


rule modelled_characterisation:
    input:
        constants=config["simulator"]["constants"],
        models=config["models_file"],
        hardware=config["hardware_file"],
        paper="config/paper_table1.yaml",
    output:
        csv="results/modelled/characterisation.csv",
        fig3_pdf=report("figures/fig3.pdf", caption="../report/fig3.rst", category="Characterisation (modelled)"),
        fig3_png="figures/fig3.png",
        fig4_pdf=report("figures/fig4.pdf", caption="../report/fig4.rst", category="Characterisation (modelled)"),
        fig4_png="figures/fig4.png",
        fig5_pdf=report("figures/fig5.pdf", caption="../report/fig5.rst", category="Characterisation (modelled)"),
        fig5_png="figures/fig5.png",
        fig6_pdf=report("figures/fig6.pdf", caption="../report/fig6.rst", category="Characterisation (modelled)"),
        fig6_png="figures/fig6.png",
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
