"""One decoder-only transformer as vLLM serves it: its shapes, its optional parts (routed experts,
multi-head latent attention, sliding-window layers, attention sinks), the formats of its weights and
KV cache, and its parameters by tensor class.

Symbols follow the SLIM paper (Section VI-A, Eq. 4): ``L`` layers, hidden size ``D``, ``H_q`` query
heads, ``H_kv`` key/value heads, head dim ``d_h`` (``D / H_q`` unless the config gives ``head_dim``),
``D_kv = H_kv d_h``, and the FFN ratio ``r_ff``. Every optional field defaults to what a dense 16-bit
model has, so such a model's numbers do not depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from slim.errors import ConfigError
from slim.specs.formats import (
    BYTES_PER_FP16,
    SIXTEEN_BIT,
    WeightFormats,
    kv_cache_bytes_per_element,
    served_formats,
)

FfnKind = Literal["two_matrix", "swiglu"]


@dataclass(frozen=True)
class MoeSpec:
    """Routed experts: in each MoE layer a router picks `experts_per_token` (``k``) of
    `n_routed_experts` (``E``) gated FFNs of width `expert_ffn_dim` for every token, and
    `n_shared_experts` experts of width `shared_expert_ffn_dim` run for every token. The
    `n_dense_layers` layers without experts (DeepSeek's ``first_k_dense_replace``, Qwen-MoE's
    ``mlp_only_layers``) run a dense FFN of the architecture's ``ffn_dim``."""

    n_routed_experts: int
    experts_per_token: int
    expert_ffn_dim: int
    n_shared_experts: int = 0
    shared_expert_ffn_dim: int = 0
    n_dense_layers: int = 0

    def __post_init__(self):
        if not 0 < self.experts_per_token <= self.n_routed_experts:
            raise ConfigError(f"experts per token ({self.experts_per_token}) must lie in 1..{self.n_routed_experts} "
                              "(the routed experts)")

    @property
    def routed_fraction(self) -> float:
        """``k / E``: the share of the routed experts one token runs."""
        return self.experts_per_token / self.n_routed_experts


@dataclass(frozen=True)
class MlaSpec:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2). Keys and values are projected up from one
    latent of `kv_lora_rank` elements, which the KV cache stores with the `qk_rope_head_dim` elements of
    the rotary key: ``kv_lora_rank + qk_rope_head_dim`` per token per layer, no K/V pair, and the same
    latent on every tensor-parallel rank (vLLM's ``ModelConfig.get_num_kv_heads`` returns 1 for MLA).
    Queries come through a `q_lora_rank` bottleneck (None: projected directly)."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int

    @property
    def latent_dim(self) -> int:
        """Elements cached per token per layer: ``r_kv + d_rope``."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class SlidingWindow:
    """`n_layers` of the layers attend only to the last `window_tokens` tokens (gpt-oss: every other
    layer, 128; Gemma-3: five of every six, 1,024); the others attend to the whole context."""

    window_tokens: int
    n_layers: int


@dataclass(frozen=True)
class ParameterCounts:
    """Parameters by tensor class (`weight_bytes` prices each at its format):

    embedding       input embeddings (and OPT's learned positions and projections)
    lm_head         the output projection; 0 when tied to the embeddings (the table serves both)
    dense           matrices of attention, dense FFNs and shared experts
    routed_experts  matrices of every routed expert of every MoE layer
    other           norms, biases, routers, attention sinks: left 16-bit by every scheme here
    """

    embedding: int
    lm_head: int
    dense: int
    routed_experts: int
    other: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.dense + self.routed_experts + self.other

    @property
    def lm_head_matrix(self) -> int:
        """Parameters of the matrix the LM head multiplies by: its own, or the tied embedding table."""
        return self.lm_head or self.embedding


@dataclass(frozen=True)
class Architecture:
    """One decoder-only transformer, as described by its public config and served by vLLM."""

    name: str
    display_name: str
    n_layers: int
    hidden_dim: int
    n_q_heads: int
    n_kv_heads: int
    ffn_dim: int
    ffn_kind: FfnKind
    n_params: int
    vocab_size: int
    embed_proj_dim: int | None = None
    aliases: tuple[str, ...] = field(default_factory=tuple)
    hf_id: str | None = None
    explicit_head_dim: int | None = None
    tied_embeddings: bool = False
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    sliding_window: SlidingWindow | None = None
    attention_sinks: bool = False
    """gpt-oss: a learned logit per head joins every softmax; it is a parameter, not a cached token, so
    it does not change the KV cache."""
    formats: WeightFormats = field(default_factory=WeightFormats)
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    """vLLM's ``--quantization`` the model is served with (`served`); None: its checkpoint's own weights."""
    parameter_counts: ParameterCounts | None = None

    # --- shapes --------------------------------------------------------------------------

    @property
    def head_dim(self) -> int:
        """``d_h``: the config's ``head_dim`` where it gives one (Qwen3, gpt-oss, Gemma-3; MLA: the
        query-key width ``d_nope + d_rope``), else ``D / H_q``."""
        return self.explicit_head_dim or self.hidden_dim // self.n_q_heads

    @property
    def q_dim(self) -> int:
        """``H_q d_h``: the width of the queries (``D`` unless ``head_dim`` says otherwise)."""
        return self.n_q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """``D_kv = H_kv d_h = D H_kv / H_q`` (equals ``D`` without GQA)."""
        return self.n_kv_heads * self.head_dim

    @property
    def ffn_ratio(self) -> float:
        """``r_ff`` such that ``4 r_ff D^2`` is the FFN FLOPs per token.

        Two-matrix FFN (OPT): ``r_ff = D_ff / D``.
        Gated SwiGLU FFN (three matrices): ``r_ff = 1.5 D_ff / D``.
        """
        ratio = self.ffn_dim / self.hidden_dim
        return 1.5 * ratio if self.ffn_kind == "swiglu" else ratio

    @property
    def ffn_matrices(self) -> int:
        """Matrices of one FFN (or expert): 3 gated, 2 otherwise."""
        return 3 if self.ffn_kind == "swiglu" else 2

    @property
    def n_moe_layers(self) -> int:
        return 0 if self.moe is None else self.n_layers - self.moe.n_dense_layers

    @property
    def n_sliding_layers(self) -> int:
        return 0 if self.sliding_window is None else self.sliding_window.n_layers

    # --- parameters ----------------------------------------------------------------------

    @property
    def parameters(self) -> ParameterCounts:
        """Parameters by class: the config's count, or for a catalog entry giving only ``n_params``
        (a dense 16-bit model) the matrices from its shapes, ``L (D q_dim + 2 D D_kv + q_dim D +
        m D D_ff)``, the embedding table ``V D_e`` (and the LM head's, untied), the rest as `other`."""
        if self.parameter_counts is not None:
            return self.parameter_counts
        d, d_embed = self.hidden_dim, self.embed_proj_dim or self.hidden_dim
        dense = self.n_layers * (2 * d * self.q_dim + 2 * d * self.kv_dim + self.ffn_matrices * d * self.ffn_dim)
        embedding = self.vocab_size * d_embed + (2 * d * d_embed if d_embed != d else 0)
        lm_head = 0 if self.tied_embeddings else self.vocab_size * d_embed
        return ParameterCounts(embedding, lm_head, dense, 0, self.n_params - embedding - lm_head - dense)

    @property
    def active_params_per_token(self) -> float:
        """Parameters one token runs through: all but the routed experts it is not routed to,
        ``n_params - (1 - k / E) routed_experts``."""
        if self.moe is None:
            return float(self.n_params)
        return self.n_params - (1 - self.moe.routed_fraction) * self.parameters.routed_experts

    @property
    def params_per_routed_expert(self) -> float:
        """Matrix parameters of one routed expert of one layer."""
        if self.moe is None or self.n_moe_layers == 0:
            return 0.0
        return self.parameters.routed_experts / (self.n_moe_layers * self.moe.n_routed_experts)

    def weight_bytes_by_class(self) -> dict[str, float]:
        """Bytes of each `ParameterCounts` class at its format (`WeightFormats`)."""
        p, f = self.parameters, self.formats
        return {"embedding": p.embedding * f.embeddings.bytes_per_weight,
                "lm_head": p.lm_head * f.embeddings.bytes_per_weight,
                "dense": p.dense * f.dense.bytes_per_weight,
                "routed_experts": p.routed_experts * f.routed_experts.bytes_per_weight,
                "other": p.other * SIXTEEN_BIT.bytes_per_weight}

    def weight_bytes(self, bytes_per_param: float | None = None) -> float:
        """Weight memory: the sum over tensor classes of parameters x bytes of the class's format
        (a 16-bit model: ``n_params x 2``); with `bytes_per_param`, ``n_params x bytes_per_param``."""
        if bytes_per_param is not None:
            return self.n_params * bytes_per_param
        if self.formats.is_sixteen_bit:
            return self.n_params * BYTES_PER_FP16     # an int, as n_params x 2 always was
        return float(sum(self.weight_bytes_by_class().values()))

    # --- KV cache ------------------------------------------------------------------------

    @property
    def kv_bytes_per_element(self) -> int:
        """``b_kv``: 2 for a 16-bit KV cache, 1 for fp8 (`kv_cache_dtype`, vLLM's ``--kv-cache-dtype``)."""
        return kv_cache_bytes_per_element(self.kv_cache_dtype, self.formats.kv_cache_scheme)

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Elements one token adds to one layer's cache: ``2 D_kv`` (K and V), or MLA's one latent
        ``r_kv + d_rope``."""
        return self.mla.latent_dim if self.mla is not None else 2 * self.kv_dim

    def kv_bytes_per_token(self, bytes_per_element: int | None = None) -> int:
        """KV-cache bytes per token over every layer: ``2 (K and V) x L x D_kv x b_kv``
        (MLA: ``L (r_kv + d_rope) b_kv``)."""
        b_kv = self.kv_bytes_per_element if bytes_per_element is None else bytes_per_element
        return self.n_layers * self.kv_elements_per_token_per_layer * b_kv

    # --- serving -------------------------------------------------------------------------

    def served(self, quantization: str | None = None, kv_cache_dtype: str = "auto") -> "Architecture":
        """The architecture vLLM runs under ``--quantization`` and ``--kv-cache-dtype``
        (`slim.specs.formats.served_formats`, `KV_CACHE_DTYPE_BYTES`); an unknown value is refused
        naming the known ones."""
        formats = served_formats(self.formats, quantization)
        kv_cache_bytes_per_element(kv_cache_dtype, formats.kv_cache_scheme)
        return replace(self, formats=formats, kv_cache_dtype=kv_cache_dtype,
                       quantization=quantization if quantization is not None else self.quantization)

    @property
    def dense_formula_gap(self) -> str | None:
        """Why SLIM's dense formula (Eqs. 7-11: one dense FFN, ``d_h = D / H_q``, 16-bit weights and K/V
        of ``H_kv`` heads per layer) does not describe this model, or None where it does. Sliding
        windows are no gap: within the window the KV scan is the formula's."""
        if self.moe is not None:
            shared = f", {self.moe.n_shared_experts} shared" if self.moe.n_shared_experts else ""
            return (f"mixture of experts ({self.moe.n_routed_experts} experts, {self.moe.experts_per_token} routed "
                    f"per token{shared}): the FLOPs and weight bytes of a decode step depend on which experts the "
                    "batch routes to, while SLIM's Eqs. 7-10 count one dense FFN per layer")
        if self.mla is not None:
            return (f"multi-head latent attention (one latent of {self.mla.latent_dim} elements per token and layer): "
                    "SLIM's KV-scan term (Eq. 11) counts K and V of H_kv heads")
        if self.head_dim != self.hidden_dim // self.n_q_heads:
            return (f"head_dim {self.head_dim} differs from D / H_q = {self.hidden_dim // self.n_q_heads}: SLIM's "
                    "Eqs. 7-11 assume d_h = D / H_q")
        if not self.formats.is_sixteen_bit:
            return f"quantised weights, {self.formats.describe()}: SLIM's Eqs. 7-11 count 16-bit weights"
        if self.kv_bytes_per_element != BYTES_PER_FP16:
            return f"a {self.kv_cache_dtype} KV cache: SLIM's KV-scan term (Eq. 11) counts 16-bit K and V"
        return None


def tensor_parallel_refusal(arch: Architecture, tensor_parallel: int, expert_parallel: bool = False) -> str | None:
    """Why vLLM refuses to split `arch` over `tensor_parallel` ranks, or None: its attention heads, hidden
    size and FFN width are split evenly over the ranks (vLLM's ``ModelConfig.verify_with_parallel_config``
    checks the heads; its column- and row-parallel layers divide the widths), and a block-wise quantised
    FFN's share on each rank is a whole number of blocks (`block_split_refusal`; with `expert_parallel`
    the routed experts are not split)."""
    if arch.n_q_heads % tensor_parallel:
        return (f"vLLM splits the {arch.n_q_heads} attention heads evenly over the ranks; {tensor_parallel} does "
                "not divide them")
    if arch.hidden_dim % tensor_parallel or arch.ffn_dim % tensor_parallel:
        return (f"vLLM splits the hidden size {arch.hidden_dim} and FFN width {arch.ffn_dim} evenly over the "
                f"ranks; {tensor_parallel} does not divide them")
    return block_split_refusal(arch, tensor_parallel, expert_parallel)


def block_split_refusal(arch: Architecture, tensor_parallel: int, expert_parallel: bool = False) -> str | None:
    """Why vLLM refuses a block-wise quantised checkpoint (fp8 ``weight_block_size`` ``[n, k]``) at
    `tensor_parallel`, or None: each rank's share of a split FFN width must be a multiple of the block,
    ``n`` for the gate and up projections' outputs and ``k`` for the down projection's input (vLLM's
    ``validate_fp8_block_shape`` for linear layers, and ``Fp8MoEMethod.create_weights``' check of the
    experts' "output_size of gate's and up's weight", ``vllm/model_executor/layers/quantization/fp8.py``).
    The routed experts are split only without `expert_parallel` (``--enable-expert-parallel`` keeps each
    whole on its rank)."""
    widths = []
    if arch.moe is None or arch.moe.n_dense_layers:
        widths.append(("FFN", arch.ffn_dim, arch.formats.dense))
    if arch.moe is not None and arch.moe.n_shared_experts:
        # vLLM runs the shared experts as one FFN of their summed width (DeepSeek's ``shared_experts``).
        widths.append(("shared experts' FFN", arch.moe.n_shared_experts * arch.moe.shared_expert_ffn_dim,
                       arch.formats.dense))
    if arch.moe is not None and not expert_parallel:
        widths.append(("experts' FFN", arch.moe.expert_ffn_dim, arch.formats.routed_experts))
    for what, width, weights in widths:
        if weights.block is None or tensor_parallel == 1:
            continue
        share = width // tensor_parallel
        if share % weights.block[0] or share % weights.block[1]:
            hint = ("; --enable-expert-parallel keeps each expert whole" if what == "experts' FFN" else "")
            return (f"the {weights.name} weights need each rank's share of the {what} width to be whole blocks: "
                    f"{width} / {tensor_parallel} = {share} is not a multiple of {weights.block[0]} (vLLM refuses "
                    f"to load them){hint}")
    return None
