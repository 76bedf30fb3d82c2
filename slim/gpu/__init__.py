"""Zero-parameter GPU arithmetic: the decode roofline (the knee note's batch knee, the
decode-attention intensity of Table I) and vLLM's KV-cache memory (what it reserves, what a
batch cap needs)."""
