"""From vLLM benchmark run directories to a table of usable runs: the file parsers of each
supported trace format (`files`), one row per run directory with a status (`ingest`), offline
results and summary tables (`offline_json`, `summary_table`, `static_batch`, `offline_ingest`),
and the cleaning policy with its report (`clean`)."""
