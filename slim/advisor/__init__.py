"""BCA, the batching configuration advisor (paper Section VII): the Eq. 13 decision rule on
any throughput/latency curve (`bca`), measured curves and full-profile BCA on them
(`measured`), Eq. 13 on any registered predictor's prediction (`predictor_bca`: SLIM-BCA on
SLIM's predicted curve, SIM-BCA on the simulator's runs, `sim_bca`), and `slim advise` as a
library call (`advise`: `advise(AdviceRequest) -> Advice`; `training_runs`: the runs it is
trained and checked on; `report`: its text and --json body)."""
