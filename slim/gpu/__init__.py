"""Zero-parameter GPU arithmetic: the physics of a decode step (weight bytes, KV bytes and FLOPs of
dense, mixture-of-experts, latent-attention, windowed and quantised models), the decode roofline (the
knee note's batch knee, generalised; the decode-attention intensity of Table I) and vLLM's KV-cache
memory (what it reserves, what a batch cap needs)."""
