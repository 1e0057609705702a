"""Blockwise fake quantisation (FP8 E4M3 and coarser formats) for low-precision rollouts.

veRL's FP8 rollout stack (FP8-RL, arXiv:2601.18150; docs/papers.md) samples from a W8A8
copy of the policy: linear-layer weights are quantised to E4M3 in 128x128 blocks, activations
in 1x128 blocks (one token x 128 channels), each block scaled by its own absmax so that the
largest entry lands on the format's largest finite value (448 for E4M3); optionally the KV
cache is FP8 too. The trainer keeps full precision, so the rollout engine's log-probs differ
from the trainer's -- the train/rollout mismatch that token TIS / MIS correct
(:mod:`rlvr_lab.train.sequence`, ``rollout_correction``).

Here quantisation is *fake*: ``quantise -> dequantise`` in float32, same shape and dtype out,
so the numerical effect is exact while the arithmetic stays float32 (no speed-up is
modelled). For a block ``X`` with ``amax = max |X|``::

    scale = amax / fmax            (computed as amax * float32(1 / fmax); scale = 1 when
                                    it is 0 or a float32 subnormal)
    Q(X)  = round_fmt(clip(X / scale, -fmax, fmax)) * scale

``round_fmt`` rounds to the nearest representable value, ties to even (XLA's conversion to
``jnp.float8_e4m3fn`` / ``jnp.float4_e2m1fn``, the ml_dtypes types, for the minifloats;
``jnp.round`` for integer grids). Zero blocks give zeros, and so do blocks with
``amax < fmax * 2^-126`` (their scale would be a float32 subnormal, which XLA on CPU flushes
to zero; the explicit rule keeps every backend alike).

Non-finite inputs give finite outputs (a degenerate input must not poison a whole block):
``amax`` is taken over the block's finite entries, ``+-inf`` saturate to ``+-fmax * scale``
(the "satfinite" conversion of FP8 hardware) and NaN becomes 0.

Blocks
------
A block shape applies to the **trailing** dimensions (leading dimensions use blocks of 1); an
entry ``None`` means the whole axis. A block longer than its axis is the whole axis. When a
block does not divide its axis the tensor is zero-padded up to a multiple and cropped after:
the last block along that axis is a *partial* block whose scale comes from its real entries
only (zeros never raise an absmax), exactly as if partial blocks were quantised on their own.

Which tensors (:func:`quantise_policy`, matching veRL / vLLM FP8, which quantise the linear
layers and keep embeddings, the LM head, norms and biases in high precision):

- **weights**: the kernels of the four ``nnx.Linear`` layers of every block (``qkv``,
  ``proj``, ``up``, ``down``; ``[in, out]`` matrices, ``weight_block`` over both axes). Token
  and position embeddings (the embedding is also the tied output head), LayerNorm scales and
  biases, and the MLP biases stay float32.
- **activations** (``quantise_activations``): the inputs of those four linear layers, via the
  ``act_hook`` of :class:`rlvr_lab.models.transformer.TransformerConfig`, in ``act_block``
  blocks over ``[tokens, channels]`` (1x128: one token, up to 128 channels -- the whole
  width at toy scale). Scales are dynamic (per call), as in vLLM's per-token-group FP8.
- **KV cache** (``quantise_kv``, off by default): keys and values as they are written to the
  cache, with the activation block over the flattened ``heads x head_dim`` channels. veRL
  instead uses per-tensor scales recalibrated each step; per-token blocks are the simpler
  dynamic variant.

Outlier channels (:func:`inject_outliers`): LLMs have a few residual channels whose
LayerNorm output is orders of magnitude larger than the rest (LLM.int8, "massive
activations"); a block that contains one gets a large absmax and rounds its other entries
coarsely, which is what block-wise scaling limits. A toy model trained from scratch has none,
and with ``d_model = 64`` every block of 64 or more covers a kernel's whole input axis, so the
block size could hardly matter. :func:`inject_outliers` creates such channels without changing
the float32 function: it multiplies LayerNorm outputs (``ln1``/``ln2`` scale and bias) of
chosen channels by a factor and divides the matching input rows of the kernels that read them
(``qkv``, ``up``) by it. A power-of-two factor makes this exact in floating point (the trainer's
log-probs are bit-identical); a factor > 1 gives *activation* outliers (inputs of ``qkv``/``up``),
a factor < 1 *weight* outliers (rows of their kernels).

Formats (:data:`FORMATS`, pick by name): ``e4m3`` (FP8, fmax 448), ``e5m2`` (FP8, 57344),
``e2m1`` (FP4, {0, .5, 1, 1.5, 2, 3, 4, 6}; the coarse format that makes the mismatch large at
toy scale), ``int8`` / ``int4`` (symmetric integer grids, fmax 127 / 7) and ``none`` (identity,
for baselines).
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import ArrayLike

from rlvr_lab._registry import Registry
from rlvr_lab.models import transformer

if TYPE_CHECKING:
    from rlvr_lab.train import sequence

LINEAR_LAYERS = ("qkv", "proj", "up", "down")
ACT_SITES = ("qkv_in", "proj_in", "up_in", "down_in")
KV_SITES = ("k", "v")


# ----------------------------------------------------------------------------- formats
@dataclasses.dataclass(frozen=True)
class Format:
    """A number format: its largest finite magnitude and a round-to-grid function.

    ``round`` maps float32 values already in ``[-fmax, fmax]`` to the nearest representable
    value (float32 out, ties to even).
    """

    name: str
    fmax: float
    round: Callable
    description: str = ""


def _cast_round(dtype):
    return lambda y: y.astype(dtype).astype(jnp.float32)


FORMATS: Registry = Registry("quant_format", "quantisation format")
for _fmt in (
        Format("e4m3", 448.0, _cast_round(jnp.float8_e4m3fn), "FP8 E4M3 (fn): 3 mantissa bits"),
        Format("e5m2", 57344.0, _cast_round(jnp.float8_e5m2), "FP8 E5M2: 2 mantissa bits"),
        Format("e2m1", 6.0, _cast_round(jnp.float4_e2m1fn), "FP4 E2M1: 1 mantissa bit"),
        Format("int8", 127.0, jnp.round, "symmetric int8 grid"),
        Format("int4", 7.0, jnp.round, "symmetric int4 grid"),
        Format("none", math.inf, lambda y: y, "identity (no quantisation)")):
    FORMATS.register(_fmt.name, _fmt)


def get_format(fmt: str | Format) -> Format:
    """A :class:`Format` by name (ValueError listing the valid names) or passed through."""
    return fmt if isinstance(fmt, Format) else FORMATS.get(fmt)


def format_names() -> list[str]:
    return FORMATS.names()


# ----------------------------------------------------------------------------- blocks
def _check_block(name: str, block) -> tuple:
    """Normalise a block spec to a tuple of positive ints / None (None = whole axis)."""
    if block is None or isinstance(block, int):
        block = (block,)
    if not isinstance(block, tuple) or not block:
        raise ValueError(f"{name}={block!r} is not allowed; use a tuple of positive ints or "
                         "None (whole axis)")
    for b in block:
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise ValueError(f"{name}={block!r} is not allowed; entries must be positive ints "
                             "or None (whole axis)")
    return block


def fake_quantise(x: ArrayLike, fmt: str | Format = "e4m3",
                  block: tuple[int | None, ...] | int | None = (128, 128)) -> jax.Array:
    """``x`` quantised to ``fmt`` in absmax-scaled blocks and dequantised (same shape, dtype).

    ``block`` covers the trailing ``len(block)`` axes (leading axes: blocks of 1); ``None``
    entries mean the whole axis; blocks that do not divide an axis leave a partial last block
    (see the module docstring). Deterministic and differentiable almost nowhere (rounding).
    """
    fmt = get_format(fmt)
    block = _check_block("block", block)
    x = jnp.asarray(x)
    if fmt.name == "none" or x.size == 0:
        return x
    if len(block) > x.ndim:
        raise ValueError(f"block={block!r} has more axes than the tensor (shape {x.shape})")
    lead = x.ndim - len(block)
    dims = x.shape[lead:]
    sizes = [d if b is None else min(b, d) for b, d in zip(block, dims)]
    xf = jnp.pad(x.astype(jnp.float32),
                 [(0, 0)] * lead + [(0, -d % s) for d, s in zip(dims, sizes)])
    split = x.shape[:lead] + tuple(v for d, s in zip(xf.shape[lead:], sizes)
                                   for v in (d // s, s))
    xb = xf.reshape(split)
    axes = tuple(lead + 2 * i + 1 for i in range(len(block)))
    finite = jnp.isfinite(xb)
    amax = jnp.max(jnp.where(finite, jnp.abs(xb), 0.0), axis=axes, keepdims=True)
    # amax * (1/fmax): XLA rewrites a division by a constant into this product under jit, so
    # writing it out keeps eager, jitted and reference results bit-identical
    scale = amax * jnp.float32(1.0 / fmt.fmax)
    # zero block, or a subnormal scale: use 1, which rounds the (tiny) entries to 0
    scale = jnp.where(scale >= jnp.finfo(jnp.float32).tiny, scale, 1.0)
    # +-inf / scale stays +-inf and saturates in the clip; NaN -> 0
    y = jnp.where(jnp.isnan(xb), 0.0, jnp.clip(xb / scale, -fmt.fmax, fmt.fmax))
    q = fmt.round(y) * scale
    q = q.reshape(xf.shape)[tuple(slice(0, d) for d in x.shape)]
    return q.astype(x.dtype)


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """What the rollout engine quantises and how (validated at construction).

    ``format``: weight format (name in :data:`FORMATS`). ``weight_block``: block over a
    kernel's ``[in, out]`` axes; an int ``b`` means ``(b, b)``, ``None`` the whole tensor
    (per-tensor scaling). ``quantise_activations`` / ``act_block`` / ``act_format`` (None: same
    as ``format``): inputs of the linear layers, block over ``[tokens, channels]``; an int
    ``b`` means ``(1, b)``. ``quantise_kv``: keys/values written to the KV cache (same block
    and format as activations).
    """

    format: str = "e4m3"
    weight_block: tuple | int | None = (128, 128)
    act_block: tuple | int | None = (1, 128)
    quantise_activations: bool = True
    act_format: str | None = None
    quantise_kv: bool = False

    def __post_init__(self):
        get_format(self.format)
        if self.act_format is not None:
            get_format(self.act_format)
        wb = self.weight_block
        wb = (wb, wb) if wb is None or isinstance(wb, int) and not isinstance(wb, bool) else wb
        ab = self.act_block
        ab = (1, ab) if isinstance(ab, int) and not isinstance(ab, bool) else ab
        wb, ab = _check_block("weight_block", wb), _check_block("act_block", ab)
        for name, blk in (("weight_block", wb), ("act_block", ab)):
            if len(blk) != 2:
                raise ValueError(f"{name}={blk!r} is not allowed; give two axes (rows, columns)")
        for name in ("quantise_activations", "quantise_kv"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed; use True/False")
        object.__setattr__(self, "weight_block", wb)
        object.__setattr__(self, "act_block", ab)

    @property
    def activation_format(self) -> str:
        return self.format if self.act_format is None else self.act_format

    @property
    def hooked(self) -> bool:
        """Whether the forward pass needs the activation hook."""
        if self.activation_format == "none":
            return False
        return self.quantise_activations or self.quantise_kv

    def label(self) -> str:
        """Short text for tables and legends, e.g. ``e4m3 W128x128 A1x128``."""
        def blk(b):
            return "x".join("all" if v is None else str(v) for v in b)
        text = f"{self.format} W{blk(self.weight_block)}"
        if self.quantise_activations:
            text += f" A{blk(self.act_block)}"
            if self.act_format is not None:
                text += f"({self.act_format})"
        return text + (" KV" if self.quantise_kv else "")

    def act_quant(self) -> "ActQuant | None":
        """The activation/KV hook for the model config (None when nothing is hooked)."""
        if not self.hooked:
            return None
        return ActQuant(self.activation_format, self.act_block, self.quantise_activations,
                        self.quantise_kv)


@dataclasses.dataclass(frozen=True)
class ActQuant:
    """The activation hook, hashable by value. It holds only the activation settings, so
    policies that differ only in their weight quantisation share one jitted sampler."""

    format: str
    block: tuple
    activations: bool = True
    kv: bool = False

    def __call__(self, site: str, x: jax.Array) -> jax.Array:
        if site in ACT_SITES and self.activations:
            return fake_quantise(x, self.format, self.block)
        if site in KV_SITES and self.kv:
            flat = x.reshape(x.shape[:-2] + (-1,))  # [B, T, H*Dh]: per token, channel groups
            return fake_quantise(flat, self.format, self.block).reshape(x.shape)
        return x


# ----------------------------------------------------------------------------- the policy
def _is_linear_kernel(path) -> bool:
    """``.../<qkv|proj|up|down>/kernel`` (nnx adds a trailing ``.value`` attribute key)."""
    keys = [getattr(p, "key", getattr(p, "name", None)) for p in path]
    if keys and keys[-1] == "value":
        keys = keys[:-1]
    return len(keys) >= 2 and keys[-1] == "kernel" and keys[-2] in LINEAR_LAYERS


def quantise_params(params: nnx.State, config: QuantConfig) -> nnx.State:
    """Parameter state with every linear-layer kernel fake-quantised (other leaves as is)."""
    def one(path, leaf):
        if _is_linear_kernel(path):
            return fake_quantise(leaf, config.format, config.weight_block)
        return leaf
    return jax.tree_util.tree_map_with_path(one, params)


def quantise_policy(policy: transformer.Policy, config: QuantConfig) -> transformer.Policy:
    """A fake-quantised copy of ``policy``: quantised linear kernels and, if configured, the
    activation / KV hook in its config (jit/vmap-safe; re-quantised from ``policy`` each call,
    like veRL's per-sync weight quantisation)."""
    model_cfg = dataclasses.replace(policy.config, act_hook=config.act_quant())
    return transformer.Policy(model_cfg, quantise_params(policy.params, config))


def make_rollout_fn(config: QuantConfig) -> Callable[..., sequence.RolloutBatch]:
    """A ``sequence.Trainer(rollout_fn=...)`` sampler that generates with the quantised
    policy; the returned ``behav_logp`` are the quantised engine's log-probs, while the
    trainer rescores in float32, so the mismatch metrics and TIS/MIS see a real gap."""
    from rlvr_lab.train import sequence

    def rollout_fn(key, policy, prompts, prompt_valid, rl_config, mesh=None):
        return sequence.rollout(key, quantise_policy(policy, config), prompts, prompt_valid,
                                rl_config, mesh)

    return rollout_fn


# ----------------------------------------------------------------------------- outliers
OUTLIER_SITES = (("ln1", "qkv"), ("ln2", "up"))  # (LayerNorm, the linear layer reading it)


def _path_keys(path) -> list:
    keys = [getattr(p, "key", getattr(p, "name", None)) for p in path]
    return keys[:-1] if keys and keys[-1] == "value" else keys


def inject_outliers(policy: transformer.Policy, channels: ArrayLike,
                    factor: float) -> transformer.Policy:
    """The same float32 function with outlier channels (see the module docstring).

    ``channels``: residual-stream channel indices (the same in every block, as LLM outlier
    features are); ``factor`` > 0: LayerNorm outputs of those channels (``ln1``, ``ln2``) are
    multiplied by it and the matching input rows of ``qkv`` / ``up`` divided by it. Exact in
    floating point for powers of two; jit/vmap-safe (``channels`` may be traced).
    """
    if not (isinstance(factor, (int, float)) and not isinstance(factor, bool)
            and math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor={factor!r} is not allowed; use a finite number > 0 "
                         "(> 1: activation outliers, < 1: weight outliers)")
    d = policy.config.d_model
    gain = jnp.ones((d,), jnp.float32).at[jnp.asarray(channels)].set(factor)
    norms = {n for n, _ in OUTLIER_SITES}
    readers = {lin for _, lin in OUTLIER_SITES}

    def one(path, leaf):
        keys = _path_keys(path)
        if len(keys) >= 2 and keys[-2] in norms and keys[-1] in ("scale", "bias"):
            return leaf * gain.astype(leaf.dtype)
        if len(keys) >= 2 and keys[-2] in readers and keys[-1] == "kernel":
            return leaf / gain.astype(leaf.dtype)[:, None]
        return leaf

    return transformer.Policy(policy.config,
                              jax.tree_util.tree_map_with_path(one, policy.params))
