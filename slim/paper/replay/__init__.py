"""The tuning replay: how much GPU time each way of choosing ``--max-num-seqs`` spends on a dataset's
measured curves, and how much throughput its choice gives up against full profiling. The curves and
their noise (`curves`), the model-free searches (`searches`), `slim tune` replayed (`tune_policy`),
the paper's plan (`paper_plan`), the scoring (`scoring`), the out-of-sample priors (`priors`), the
dataset driver (`dataset`) and the summary (`summary`)."""
