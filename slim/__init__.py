"""SLIM: a semi-analytical model of vLLM serving throughput and latency, and the
pipeline pieces around it (ingest, cleaning, fitting, advising)."""

__version__ = "0.1.0"
