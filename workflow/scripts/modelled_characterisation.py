"""Snakemake adapter: the modelled characterisation table (simulated phase times, modelled decode metrics)."""
from slim.paper.modelled_characterisation import characterisation_csv, characterisation_table, load_characterisation
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
config, arch, hardware, constants = load_characterisation(snakemake.params.characterisation, snakemake.input.models,
                                                          snakemake.input.hardware, snakemake.input.constants)
table = characterisation_table(config, arch, hardware, constants)
write_text(characterisation_csv(table), snakemake.output.csv)
for _, row in table.iterrows():
    log.info("%s = %d: decode share %.3f, DRAM util mean %.3f peak %.3f, attention share %.3f, "
             "final attention %.2f FLOP/B at %.2f TFLOP/s", row["sweep"], row["value"], row["decode_share"],
             row["dram_util_mean"], row["dram_util_peak"], row["attention_share"],
             row["final_attention_intensity_flop_per_byte"], row["final_attention_tflop_per_s"])
