rule simulate:
    input:
        grid=config["simulator"]["grid"],
        constants=config["simulator"]["constants"],
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        traces=directory("raw_traces/simulated"),
    log:
        "logs/simulated/simulate.log",
    benchmark:
        "benchmarks/simulated/simulate.tsv"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/simulate.py"


# Every ok or preempted run of a real dataset simulated once: its schedule, from which SIM's
# throughput, mean batch and preemptions follow for any fitted constants (slim.sim.schedules).
rule sim_schedules:
    input:
        runs="results/{dataset}/runs.parquet",
        constants=config["simulator"]["constants"],
        models=config["models_file"],
        hardware=config["hardware_file"],
    output:
        schedules="results/{dataset}/sim_schedules.parquet",
    params:
        hardware=hardware_name,
        rows=dataset_rows,
    log:
        "logs/{dataset}/sim_schedules.log",
    benchmark:
        "benchmarks/{dataset}/sim_schedules.tsv"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../environment.yml"
    script:
        "../scripts/sim_schedules.py"


rule calibrate_simulator:
    input:
        runs=f"results/{config['simulator']['calibration_dataset']}/runs.parquet",
        schedules=f"results/{config['simulator']['calibration_dataset']}/sim_schedules.parquet",
        models=config["models_file"],
        hardware=config["hardware_file"],
        constants=config["simulator"]["constants"],
    output:
        constants="results/simulator/h100-64gb-sim.yaml",
        validation="results/simulator/validation_per_curve.csv",
        table="figures/table_sim_validation.tex",
        table_html=report(
            "figures/table_sim_validation.html", caption="../report/table_sim_validation.rst", category="Simulator"
        ),
        pdf="figures/sim_validation.pdf",
        png=report("figures/sim_validation.png", caption="../report/table_sim_validation.rst", category="Simulator"),
    params:
        hardware=simulator_calibration_hardware,
    log:
        "logs/simulator/calibrate.log",
    benchmark:
        "benchmarks/simulator/calibrate.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../../environment.yml"
    script:
        "../scripts/calibrate_simulator.py"
