"""A small next-scale autoregressive model (VAR-style) in flax.nnx.

The sequence is the flat pyramid (``data.flatten``): ``sum(scales)`` positions, scale after
scale. Position ``t`` of scale ``k`` predicts token ``t`` of scale ``k``. Its input is

* scale 0: the class embedding (VAR's start token);
* scale ``k >= 1``: the embedding of the token of scale ``k - 1`` above it (nearest
  upsampling, ``data.parent_index``),

plus a learned embedding of the position (which encodes the scale). Attention is
**block-causal** across scales (:func:`block_causal_mask`): a position of scale ``k`` attends
to every position of scales ``<= k``, so all tokens of a scale are predicted in parallel from
the coarser scales, and nothing finer leaks in. One forward pass returns the logits of every
scale; teacher forcing feeds the ground-truth pyramid, sampling (:func:`sample`) runs one
pass per scale and fills the scales coarse to fine.

Functional API (everything composes with ``jit``/``vmap``/``lax.scan``)::

    graphdef, params = init(key, model_config, law_config)
    logits = forward(graphdef, params, classes, flat)     # [B, T, levels], T = sum(scales)
    flat = sample(key, graphdef, params, classes, law_config, temperature=1.0)

``forward`` reads only the coarser-scale tokens of ``flat`` for each position (the tokens of
the finest scale are never an input), so the same call scores a ground-truth pyramid (teacher
forcing) or any other context (student forcing). Each call of :func:`forward` in a traced
function is one model forward pass; :func:`count_traced` and :func:`instrument` count them.

Compile time dominates a small run on a CPU, so the blocks use one fused QKV projection and
plain ``einsum`` attention, and :func:`init` fills every parameter from a single normal draw
(GPT-2 style: N(0, 0.02) embeddings and kernels, output projections scaled by
``1/sqrt(2 n_layers)``, zero biases, unit LayerNorm scales) instead of one random call per
parameter.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import jax.stages
import numpy as np
from flax import nnx
from jax.typing import ArrayLike

from rlvr_lab._registry import positive_int
from rlvr_lab.papers.sar import data


@dataclass(frozen=True)
class ModelConfig:
    """Width ``d_model``, ``n_layers`` pre-LN blocks of ``n_heads``-head block-causal
    attention and a GELU MLP of width ``mlp_ratio * d_model``."""

    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 2
    mlp_ratio: int = 2

    def __post_init__(self):
        for name in ("d_model", "n_layers", "n_heads", "mlp_ratio"):
            positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by "
                             f"n_heads={self.n_heads}")

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


def block_causal_mask(scales: Sequence[int]) -> np.ndarray:
    """``[T, T]`` bool: query position ``q`` may attend to key ``j`` iff ``scale(j) <=
    scale(q)``."""
    b = data.block_ids(scales)
    return b[None, :] <= b[:, None]


class Block(nnx.Module):
    """Pre-LN block: ``x + attn(ln(x))`` (masked multi-head attention), ``x + mlp(ln(x))``."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d = cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.qkv = nnx.Linear(d, 3 * d, rngs=rngs)
        self.proj = nnx.Linear(d, d, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.up = nnx.Linear(d, cfg.mlp_ratio * d, rngs=rngs)
        self.down = nnx.Linear(cfg.mlp_ratio * d, d, rngs=rngs)

    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = jnp.split(self.qkv(self.ln1(x)).reshape(B, T, 3, h, d // h), 3, axis=2)
        q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]                     # [B, T, h, dh]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h)
        scores = jnp.where(mask, scores, -1e9)
        att = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v).reshape(B, T, d)
        x = x + self.proj(att)
        return x + self.down(jax.nn.gelu(self.up(self.ln2(x))))


class NextScaleModel(nnx.Module):
    """Class + upsampled coarser tokens -> logits of every scale (see the module docstring)."""

    def __init__(self, cfg: ModelConfig, law: data.LawConfig, *, rngs: nnx.Rngs):
        d, T = cfg.d_model, law.seq_len
        self.class_embed = nnx.Embed(law.num_classes, d, rngs=rngs)
        self.token_embed = nnx.Embed(law.levels, d, rngs=rngs)
        self.pos_embed = nnx.Param(jnp.zeros((T, d)))
        self.blocks = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.n_layers)])
        self.ln_f = nnx.LayerNorm(d, rngs=rngs)
        self.head = nnx.Linear(d, law.levels, rngs=rngs)
        self.scales = tuple(law.scales)  # static (hashable), not a parameter

    def __call__(self, classes: jax.Array, flat: jax.Array) -> jax.Array:
        ctx = self.token_embed(flat[:, data.parent_index(self.scales)])  # [B, T - s0, d]
        first = self.class_embed(classes)[:, None, :]                    # [B, 1, d]
        first = jnp.broadcast_to(first, (flat.shape[0], self.scales[0], first.shape[-1]))
        x = jnp.concatenate([first, ctx], axis=1) + self.pos_embed[...]
        mask = jnp.asarray(block_causal_mask(self.scales))[None, None]
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln_f(x))


def graphdef_and_shapes(cfg: ModelConfig, law: data.LawConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """``(graphdef, abstract params)`` without running any initialiser."""
    return nnx.split(nnx.eval_shape(lambda: NextScaleModel(cfg, law, rngs=nnx.Rngs(0))))


def _init_scale(path, shape, n_layers: int) -> tuple[float, float]:
    """(std, constant) of one parameter given its path: LayerNorm scales 1, biases 0,
    output projections N(0, 0.02/sqrt(2 n_layers)), everything else N(0, 0.02)."""
    names = [str(getattr(p, "key", p)) for p in path]
    leaf = names[-1] if names[-1] not in ("value", "raw_value") else names[-2]
    if leaf == "scale":
        return 0.0, 1.0
    if leaf == "bias":
        return 0.0, 0.0
    if "proj" in names or "down" in names:
        return 0.02 / np.sqrt(2 * n_layers), 0.0
    return 0.02, 0.0


def init(key: jax.Array, cfg: ModelConfig, law: data.LawConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """``(graphdef, params)``: every parameter from one normal draw (module docstring)."""
    graphdef, shapes = graphdef_and_shapes(cfg, law)
    flat, treedef = jax.tree_util.tree_flatten_with_path(shapes)
    sizes = [int(np.prod(leaf.shape)) for _, leaf in flat]
    noise = jax.random.normal(key, (sum(sizes),))
    leaves, start = [], 0
    for (path, leaf), n in zip(flat, sizes):
        std, const = _init_scale(path, leaf.shape, cfg.n_layers)
        leaves.append((const + std * noise[start:start + n]).reshape(leaf.shape)
                      .astype(leaf.dtype))
        start += n
    return graphdef, jax.tree_util.tree_unflatten(treedef, leaves)


_COUNTER = {"traced": 0, "executed": 0, "instrument": False}


def _tick():
    _COUNTER["executed"] += 1


def forward(graphdef: nnx.GraphDef, params: nnx.State, classes: jax.Array,
            flat: jax.Array) -> jax.Array:
    """Logits ``[B, T, levels]`` of every position given the class and the (coarser-scale)
    tokens in ``flat``. One call = one forward pass of the model. Traced while
    :func:`count_executed` is active, it also reports each execution to the host."""
    _COUNTER["traced"] += 1
    if _COUNTER["instrument"]:
        jax.debug.callback(_tick)
    return nnx.merge(graphdef, params)(classes, flat)


def count_traced(fn: Callable[..., Any], *args: Any) -> int:
    """Forward passes written in ``fn`` (counted while tracing it once: a pass inside a loop
    body or in both branches of a ``lax.cond`` counts once)."""
    before = _COUNTER["traced"]
    jax.make_jaxpr(fn)(*args)
    return _COUNTER["traced"] - before


def instrument(fn: Callable[..., Any], *args: Any) -> jax.stages.Compiled:
    """``fn`` compiled with a host callback in every forward pass, for
    :func:`count_executed` (``args`` fix the shapes; compiled fast, it runs rarely)."""
    _COUNTER["instrument"] = True
    try:
        lowered = jax.jit(fn, compiler_options={"xla_backend_optimization_level": 0}).lower(
            *args)
    finally:
        _COUNTER["instrument"] = False
    return lowered.compile()


def count_executed(instrumented: jax.stages.Compiled, *args: Any) -> int:
    """Forward passes actually run by one call of an :func:`instrument`-ed function: loop
    iterations count one by one, an untaken ``lax.cond`` branch does not count."""
    jax.effects_barrier()
    before = _COUNTER["executed"]
    jax.block_until_ready(instrumented(*args))
    jax.effects_barrier()
    return _COUNTER["executed"] - before


def gumbel_argmax(uniforms: ArrayLike, logits: ArrayLike, temperature: ArrayLike) -> jax.Array:
    """Tokens drawn from ``softmax(logits / temperature)`` with the Gumbel-max trick on given
    uniforms (same shape as ``logits``); ``temperature == 0`` takes the argmax."""
    t = jnp.asarray(temperature, jnp.float32)
    u = jnp.clip(uniforms, 1e-7, 1.0 - 1e-7)
    gumbel = -jnp.log(-jnp.log(u))
    scored = jnp.where(t > 0, logits / jnp.where(t > 0, t, 1.0) + gumbel, logits)
    return jnp.argmax(scored, -1).astype(jnp.int32)


def sample(key: jax.Array, graphdef: nnx.GraphDef, params: nnx.State, classes: jax.Array,
           law: data.LawConfig, temperature: ArrayLike = 1.0,
           upto: int | None = None) -> jax.Array:
    """Generate pyramids scale by scale: for ``k = 0 .. upto - 1`` one forward pass on the
    scales filled so far, then the tokens of scale ``k`` drawn in parallel. Returns the flat
    pyramids ``[B, T]`` (scales ``>= upto`` left 0; ``upto`` defaults to all scales), i.e.
    ``upto`` forward passes."""
    S = law.num_scales if upto is None else upto
    blocks = jnp.asarray(data.block_ids(law.scales))
    u = jax.random.uniform(key, (S, classes.shape[0], law.seq_len, law.levels))

    def body(k, flat):
        logits = forward(graphdef, params, classes, flat)
        drawn = gumbel_argmax(u[k], logits, temperature)
        return jnp.where(blocks[None] == k, drawn, flat)

    flat = jnp.zeros((classes.shape[0], law.seq_len), jnp.int32)
    return jax.lax.fori_loop(0, S, body, flat)
