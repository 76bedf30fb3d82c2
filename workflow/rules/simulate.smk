rule simulate:
    input:
        grid=config["simulator"]["grid"],
        constants=config["simulator"]["constants"],
    output:
        traces=directory("raw_traces/simulated"),
    params:
        models_file=config["models_file"],
        hardware_file=config["hardware_file"],
    threads: 2
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/simulated/simulate.log",
    benchmark:
        "benchmarks/simulated/simulate.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/simulate.py"


rule calibrate_simulator:
    input:
        runs=f"results/{config['simulator']['calibration_dataset']}/runs.parquet",
    output:
        constants="results/simulator/h100-64gb-sim.yaml",
        validation="results/simulator/validation_per_curve.csv",
    params:
        models_file=config["models_file"],
        hardware=simulator_calibration_hardware,
        hardware_file=config["hardware_file"],
        constants=config["simulator"]["constants"],
    log:
        "logs/simulator/calibrate.log",
    benchmark:
        "benchmarks/simulator/calibrate.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/calibrate_simulator.py"


rule sim_validation_table:
    input:
        validation="results/simulator/validation_per_curve.csv",
    output:
        table=report("figures/table_sim_validation.tex", caption="../report/table_sim_validation.rst",
                     category="Simulator"),
        pdf="figures/sim_validation.pdf",
        png=report("figures/sim_validation.png", caption="../report/table_sim_validation.rst",
                   category="Simulator"),
    log:
        "logs/simulator/validation_table.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/sim_validation_table.py"
