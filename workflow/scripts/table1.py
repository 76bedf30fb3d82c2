"""Snakemake adapter: Table I, the analytical decode-attention roofline beside the paper's measurements."""
from slim.paper.decode_attention_table import (
    intensity_agreement,
    load_paper_table1,
    table1_frame,
    table1_html,
    table1_latex,
)
from slim.pipeline.io import job_specs, open_log, write_csv, write_text

log = open_log(snakemake.log[0])
paper = load_paper_table1(snakemake.input.paper)
specs = job_specs(snakemake)
arch, hardware = specs.catalog[paper.model], specs.hardware_table[paper.hardware]
frame = table1_frame(arch, hardware, paper.rows)
write_csv(frame, snakemake.output.csv)
write_text(table1_latex(frame, arch, hardware, paper.source), snakemake.output.tex)
write_text(table1_html(frame, arch, hardware, paper.source), snakemake.output.html)
gap_to_mean, worst_gap = intensity_agreement(frame)
log.info("Table I (%s on %s): roofline AI %.2f FLOP/B, ceiling %.2f TFLOP/s; AI gap to mean measured %.1f%%, "
         "worst row %.1f%%", arch.name, hardware.name, frame["intensity_model_flop_per_byte"].iloc[0],
         frame["attainable_tflop_per_s"].iloc[0], 100 * gap_to_mean, 100 * worst_gap)
