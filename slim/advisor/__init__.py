"""BCA, the batching configuration advisor (paper Section VII): the Eq. 13 decision rule on
any throughput/latency curve (`bca`), measured curves and full-profile BCA on them
(`measured`), and SLIM-BCA on SLIM's predicted curve (`slim_bca`)."""
