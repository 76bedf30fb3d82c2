"""Glue between the Snakemake workflow and the library: the checks of config/config.yaml that
a JSON schema cannot express, input functions of the rules, the scripts' logging and
deterministic writes, and the generated sections of the README and docs/results.md."""
