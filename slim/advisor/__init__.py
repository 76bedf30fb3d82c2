"""BCA, the batching configuration advisor (paper Section VII): the Eq. 13 decision rule on
any throughput/latency curve (`bca`), measured curves and full-profile BCA on them
(`measured`), SLIM-BCA on SLIM's predicted curve (`slim_bca`), SIM-BCA on the simulator's
(`sim_bca`), and `slim advise` as a library call (`advise`: `advise(AdviceRequest) -> Advice`;
`training_runs`: the runs it is trained and checked on; `report`: its text and --json body)."""
