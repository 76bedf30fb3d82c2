# Fig. 11 (SLIM fitted on OPT only, unseen architectures): rules to be written.
