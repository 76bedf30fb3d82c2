# Paper figures of the held-out evaluation: Fig. 9 (every setting) and Fig. 10 (unseen model).
# Input functions evaluation_files, settings_file and dataset_label live in common.smk.


localrules:
    fig9,
    fig10,


rule fig9:
    input:
        predictions=evaluation_files,
        settings=settings_file,
    output:
        pdf=report(
            "figures/{dataset}/fig9.pdf",
            caption="../report/fig9.rst",
            category="Held-out accuracy",
        ),
        png="figures/{dataset}/fig9.png",
    params:
        dataset_label=dataset_label,
        observed=observed_kind,
    log:
        "logs/{dataset}/fig9.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/plot_fig9.py"


rule fig10:
    input:
        predictions=evaluation_files,
        settings=settings_file,
    output:
        pdf=report(
            "figures/{dataset}/fig10.pdf",
            caption="../report/fig10.rst",
            category="Held-out accuracy",
        ),
        png="figures/{dataset}/fig10.png",
    params:
        dataset_label=dataset_label,
        setting=fig10_setting,
        observed=observed_kind,
    log:
        "logs/{dataset}/fig10.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/plot_fig10.py"
