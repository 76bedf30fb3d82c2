# SLIM replication pipeline: raw vLLM traces -> ingest -> clean -> fits -> advisor -> tables and figures.
from snakemake.utils import min_version, validate

from slim.yaml_files import parse_yaml

min_version("9.19")
# Snakemake's own message for a YAML syntax error names neither the file nor the line.
parse_yaml("config/config.yaml")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/bca.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/characterise.smk"
include: "workflow/rules/generalisation.smk"
include: "workflow/rules/accelerators.smk"
include: "workflow/rules/beyond_paper.smk"
include: "workflow/rules/layout_choices.smk"
include: "workflow/rules/slo.smk"
include: "workflow/rules/tuning.smk"


# The simulator's rules and the modelled characterisation's exist only where the config has their
# sections (a config of real data alone, such as a user's, has neither).
if "simulator" in config:

    include: "workflow/rules/simulate.smk"


if "characterisation" in config:

    include: "workflow/rules/modelled.smk"


rule all:
    default_target: True
    input:
        PLAN.all_targets(),
