"""A calibrated step-level simulator of a vLLM server (V0, or V1 by version or setting) under the
benchmark client.

It is the project's richer ground truth (scheduler + kernel roofline), not SLIM's
closed form: `simulate_run` for one run, `simulate_grid` / `simulate_grid_to_dir` for a
configured grid, `write_run_dir` for the public-trace file layout, `calibrate` to fit
its few constants on real traces, `step_cost_breakdown` for per-component step costs.
As a held-out predictor (SIM) it is calibrated on cached schedules (`schedules`,
`linear_cost`, `schedule_fit`) and drives SIM-BCA (`slim.advisor.sim_bca`).

Modules: `constants` (calibrated and fixed constants), `cost` (kernel roofline cost of a
step), `memory` (KV capacity at server start), `scheduler` (V0's queues, blocks, requests),
`scheduler_v1` (V1's), `vllm_defaults` (each vLLM release's scheduler defaults),
`jitter` and `step_timer` (step durations), `metrics` (counters, scraped samples,
accounting), `result`, `engine` (the step loop, `simulate_run`), `grid`, `rundir`, `schedules`
(every run's schedule simulated once), `linear_cost` (a schedule's cost as a function of the
fitted constants), `schedule_fit` (calibration on schedules), `calibrate`.
"""

from slim.sim.constants import FITTED_CONSTANTS, SimConstants, load_sim_constants
from slim.sim.cost import StepCostModel, step_cost_breakdown
from slim.sim.engine import simulate_run
from slim.sim.memory import KvCachePlan, kv_cache_plan
from slim.sim.result import SimResult

__all__ = [
    "FITTED_CONSTANTS", "KvCachePlan", "SimConstants", "SimResult", "StepCostModel", "kv_cache_plan",
    "load_sim_constants", "simulate_run", "step_cost_breakdown",
]
