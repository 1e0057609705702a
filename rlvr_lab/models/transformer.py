"""A tiny decoder-only transformer policy (flax.nnx) with KV-cache sampling and scoring.

The module (:class:`Transformer`) is a plain pre-LN GPT: token + learned position embeddings,
``n_layers`` blocks of causal multi-head attention and a GELU MLP, a final LayerNorm and an
output head tied to the token embedding.

Everything outside the module is functional so that it composes with ``jit``, ``vmap`` (seeds),
``lax.scan`` and sharding: a :class:`Policy` is a pytree holding the static
:class:`TransformerConfig` and the parameter state (``nnx.State``); functions rebuild the module
with ``nnx.merge`` inside the trace.

Sequence layout used by sampling, scoring and training
------------------------------------------------------
Prompts are **left-padded** to a common width ``P`` (``PAD`` tokens, ``prompt_valid`` False),
so every prompt ends at column ``P - 1`` and generation writes columns ``P .. P + N - 1``.
Positions count from each row's first valid token, so padding does not change the model's
output. Completions are ``[B, N]`` with a ``mask`` that is True up to and including the first
EOS (or all ``N`` tokens when no EOS was produced).

Public API (stable; other modules build on it)::

    policy = init(key, config)                                    # Policy
    out = sample(key, policy, prompts, prompt_valid, max_new_tokens=N,
                 temperature=1.0, top_p=1.0, eos_id=EOS)          # Rollout
    out.tokens, out.logp, out.entropy, out.mask                   # each [B, N]
    logp = score(policy, prompts, prompt_valid, completions, temperature=1.0)   # [B, N]
    logp, ent = score(..., with_entropy=True)

``logp`` and ``entropy`` always refer to the temperature-scaled full distribution
``softmax(logits / T)`` -- the distribution :func:`score` recomputes for ratios and KL; top-p
truncation changes which tokens are drawn but is not folded into the reported log-probs
(as in verl, which recomputes log-probs with the temperature only).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx, struct
from jax.typing import ArrayLike

from rlvr_lab import _registry
from rlvr_lab.utils import DECODE_COMPILE, jit_cpu_options

PAD_ID = 0
EOS_ID = 2


# ----------------------------------------------------------------------------- config
COMPUTE_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Static architecture of the policy.

    ``max_len`` bounds prompt width + generated tokens (the learned position table size).
    ``d_ff`` defaults to ``4 * d_model``.

    ``act_hook`` (optional, default None = off, nothing changes): a hashable callable
    ``hook(site, x) -> x`` applied to activations at named sites -- the inputs of the four
    linear layers (``"qkv_in"``, ``"proj_in"``, ``"up_in"``, ``"down_in"``) and the keys and
    values written to the KV cache (``"k"``, ``"v"``, shape ``[B, T, H, Dh]``). Used by
    :mod:`rlvr_lab.papers.fp8.quant` for W8A8 / FP8-KV fake-quantised rollouts. It is left out
    of the ``repr`` so checkpoint structure strings (and cached SFT bases) are unchanged.

    ``dtype``: the operand dtype of the four linear layers' matmuls, ``"float32"`` (default)
    or ``"bfloat16"`` (mixed precision: inputs and weights rounded to bfloat16, products
    accumulated and returned in float32, also in the gradient matmuls; parameters, residual
    stream, attention, KV cache, LayerNorms, softmaxes and the optimizer stay float32). On
    CPUs with AVX-512 BF16 such matmuls run about twice as fast as float32 (measured: 883 vs
    472 GFLOP/s on [2560, 128] @ [128, 512]; with a bfloat16 *result* they ran at 352, slower
    than float32). Numbers change by bfloat16 rounding (8-bit mantissa): a bfloat16 run is not
    a float32 run. bfloat16 layers support reverse-mode differentiation only (``jax.grad``,
    ``jax.vjp``). Left out of the ``repr`` too: parameters are float32 either way, so
    checkpoints load into both.
    """

    vocab_size: int
    max_len: int = 32
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None
    act_hook: Any = dataclasses.field(default=None, repr=False)
    dtype: str = dataclasses.field(default="float32", repr=False)

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; it must be a positive int")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or self.d_ff < 1):
            raise ValueError(f"d_ff={self.d_ff!r} is not allowed; use a positive int or None")
        if self.dtype not in COMPUTE_DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is not allowed; use one of "
                             f"{', '.join(COMPUTE_DTYPES)}")
        if self.act_hook is not None and not callable(self.act_hook):
            raise ValueError(f"act_hook={self.act_hook!r} is not allowed; use a callable or None")

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def num_params(self) -> int:
        d, f, v = self.d_model, self.ff, self.vocab_size
        block = 4 * d * d + 2 * d * f + f + d + 4 * d  # attn (no bias), MLP (+bias), 2 LayerNorms
        return v * d + self.max_len * d + self.n_layers * block + 2 * d

    def flops_per_token(self, context: int) -> float:
        """Forward FLOPs per token (2 per multiply-add): matmuls + attention over ``context``."""
        d, f, v = self.d_model, self.ff, self.vocab_size
        matmul = self.n_layers * (4 * d * d + 2 * d * f) + d * v
        return 2.0 * matmul + self.n_layers * 4.0 * context * d


# ----------------------------------------------------------------------------- module
_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)  # masked logit (as jax.nn.dot_product_attention)


def _heads_major(x):
    """``[B, T, H, Dh] <-> [B, H, T, Dh]``."""
    return x.transpose(0, 2, 1, 3)


def _attention(q, k, v, mask):
    """``softmax(q k^T / sqrt(Dh)) v`` on heads-major ``q [B, H, T, Dh]``, ``k, v [B, H, S,
    Dh]`` with a boolean ``mask`` broadcastable to ``[B, H, T, S]`` -> ``[B, H, T, Dh]``.

    The arithmetic of ``jax.nn.dot_product_attention`` (scale after the product, masked
    logits at ``-0.7 * float32 max``, softmax in float32), written for the heads-major layout:
    every contraction is then a plain batched matmul over ``(B, H)``, where the token-major
    layout made XLA:CPU transpose the whole KV cache at every decoding step.
    """
    logits = jnp.einsum("bhtd,bhsd->bhts", q, k, preferred_element_type=jnp.float32)
    logits = jnp.where(mask, logits * (q.shape[-1] ** -0.5), _NEG)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhts,bhsd->bhtd", probs, v)


_ROWS = (((1,), (0,)), ((), ()))   # dot_general dimensions of [rows, in] @ [in, out]


@jax.custom_jvp
def _rows_matmul(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jax.lax.dot_general(x, kernel, _ROWS)


@_rows_matmul.defjvp
def _rows_matmul_jvp(primals, tangents):
    """``d(x W) = dx W + x dW``, the second term written as a contraction of an explicit,
    materialised ``x^T``: its transpose -- the weight gradient ``x^T g`` -- is then a plain
    ``[in, rows] @ [rows, out]`` matmul. XLA:CPU otherwise contracts ``x``'s row axis in place,
    1.3-1.7x slower for the model's shapes (measured on 2560 rows, float32: 222 -> 386 GFLOP/s
    for [2560, 512]^T [2560, 128], 330 -> 409 for [2560, 128]^T [2560, 384]). The barrier keeps
    XLA from folding the transpose back into the dot."""
    x, kernel = primals
    dx, dkernel = tangents
    x_t = jax.lax.optimization_barrier(x.T)
    out = _rows_matmul(x, kernel)
    tangent = (jax.lax.dot_general(dx, kernel, _ROWS)
               + jax.lax.dot_general(x_t, dkernel, (((0,), (0,)), ((), ()))))
    return out, tangent


@jax.custom_vjp
def _rows_matmul_bf16(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """``x @ kernel`` of bfloat16 operands, accumulated and returned in float32."""
    return jax.lax.dot_general(x, kernel, _ROWS, preferred_element_type=jnp.float32)


def _rows_matmul_bf16_fwd(x, kernel):
    return _rows_matmul_bf16(x, kernel), (x, kernel)


def _rows_matmul_bf16_bwd(residuals, g):
    # the gradient matmuls take bfloat16 operands too (XLA:CPU's fast kernels need bfloat16
    # inputs with a float32 result), the weight gradient again from a materialised x^T
    x, kernel = residuals
    g = g.astype(x.dtype)
    dx = jax.lax.dot_general(g, kernel, (((1,), (1,)), ((), ())),
                             preferred_element_type=jnp.float32)
    dkernel = jax.lax.dot_general(jax.lax.optimization_barrier(x.T), g, _ROWS,
                                  preferred_element_type=jnp.float32)
    return dx.astype(x.dtype), dkernel.astype(kernel.dtype)


_rows_matmul_bf16.defvjp(_rows_matmul_bf16_fwd, _rows_matmul_bf16_bwd)


def _dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                 **kwargs):
    """``jax.lax.dot_general`` for the linear layers: a 2-D ``[rows, in] @ [in, out]`` goes
    through :func:`_rows_matmul` (same forward, a faster weight gradient on CPU), or with
    bfloat16 operands and a float32 result through :func:`_rows_matmul_bf16`."""
    (contract_l, contract_r), (batch_l, batch_r) = dimension_numbers
    rows = (lhs.ndim == 2 and rhs.ndim == 2 and tuple(contract_l) == (1,)
            and tuple(contract_r) == (0,) and not batch_l and not batch_r
            and precision is None and kwargs.get("out_sharding") is None)
    if rows and preferred_element_type is None:
        return _rows_matmul(lhs, rhs)
    if (rows and lhs.dtype == rhs.dtype == jnp.bfloat16
            and preferred_element_type == jnp.float32):
        return _rows_matmul_bf16(lhs, rhs)
    return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type, **kwargs)


class Block(nnx.Module):
    """Pre-LN block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        d = cfg.d_model
        self.cfg = cfg
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        # float32: no dtype options, so the layers compute exactly as before the option existed
        low = {} if cfg.dtype == "float32" else {"dtype": jnp.dtype(cfg.dtype),
                                                 "preferred_element_type": jnp.float32}
        linear = functools.partial(nnx.Linear, dot_general=_dot_general, rngs=rngs, **low)
        self.qkv = linear(d, 3 * d, use_bias=False)
        out_init = nnx.initializers.normal(0.02 / (2 * cfg.n_layers) ** 0.5)  # GPT-2 scaling
        self.proj = linear(d, d, use_bias=False, kernel_init=out_init)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.up = linear(d, cfg.ff)
        self.down = linear(cfg.ff, d, kernel_init=out_init)

    def act(self, site: str, x: jax.Array) -> jax.Array:
        """The config's activation hook at ``site`` (identity when ``act_hook`` is None)."""
        hook = self.cfg.act_hook
        return x if hook is None else hook(site, x)

    def _act_rows(self, site: str, x, b: int, t: int):
        """:meth:`act` on token rows ``[B*T, F]``; the hook sees them as ``[B, T, F]``."""
        return x if self.cfg.act_hook is None else self.act(site, x.reshape(b, t, -1)).reshape(
            x.shape)

    def _qkv_rows(self, x, b: int, t: int):
        """Queries, keys, values ``[B, T, H, Dh]`` of the residual rows ``x [B*T, D]``."""
        q, k, v = jnp.split(self.qkv(self._act_rows("qkv_in", self.ln1(x), b, t)), 3, axis=-1)
        shape = (b, t, self.cfg.n_heads, self.cfg.head_dim)
        return q.reshape(shape), self.act("k", k.reshape(shape)), self.act("v", v.reshape(shape))

    def _finish_rows(self, x, att, b: int, t: int):
        """The residual rows ``x [B*T, D]`` after the attention output ``att [B, H, T, Dh]``
        and the MLP. Linear layers see 2-D ``[B*T, F]`` operands: XLA:CPU's gradient of a
        3-D ``dot_general`` spent ~20% more time in transposes (measured)."""
        att = _heads_major(att).reshape(x.shape)
        x = x + self.proj(self._act_rows("proj_in", att, b, t))
        hidden = jax.nn.gelu(self.up(self._act_rows("up_in", self.ln2(x), b, t)))
        return x + self.down(self._act_rows("down_in", hidden, b, t))

    def qkv_heads(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Queries, keys, values ``[B, T, H, Dh]`` of ``x [B, T, D]`` (the hook sees keys and
        values in this shape)."""
        b, t, d = x.shape
        return self._qkv_rows(x.reshape(b * t, d), b, t)

    def finish(self, x: jax.Array, q: jax.Array, k: jax.Array, v: jax.Array,
               mask: ArrayLike) -> jax.Array:
        """Attention of queries ``q`` over keys/values ``k, v`` (``[B, T|S, H, Dh]``, mask
        ``[B, 1, T, S]``), then the MLP."""
        return self.finish_heads(x, _heads_major(q), _heads_major(k), _heads_major(v), mask)

    def finish_heads(self, x: jax.Array, q: jax.Array, k: jax.Array, v: jax.Array,
                     mask: ArrayLike) -> jax.Array:
        """:meth:`finish` with heads-major ``q [B, H, T, Dh]``, ``k, v [B, H, S, Dh]``."""
        b, t, d = x.shape
        return self._finish_rows(x.reshape(b * t, d), _attention(q, k, v, mask), b, t).reshape(
            x.shape)


class Transformer(nnx.Module):
    """Decoder-only transformer. ``__call__`` is the full causal pass; ``decode`` one step."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab_size, cfg.d_model,
                               embedding_init=nnx.initializers.normal(0.02), rngs=rngs)
        self.pos = nnx.Embed(cfg.max_len, cfg.d_model,
                             embedding_init=nnx.initializers.normal(0.01), rngs=rngs)
        self.blocks = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.n_layers)])
        self.ln_f = nnx.LayerNorm(cfg.d_model, rngs=rngs)

    def __call__(self, tokens: jax.Array, positions: jax.Array, valid: jax.Array, *,
                 return_cache: bool = False, heads_major: bool = False
                 ) -> jax.Array | tuple[jax.Array, tuple[tuple[jax.Array, jax.Array], ...]]:
        """Logits ``[B, T, V]`` for every position (causal, pads masked as keys).

        With ``return_cache`` also the per-layer ``(k, v)`` of shape ``[B, T, H, Dh]`` each
        (``[B, H, T, Dh]`` with ``heads_major``, the layout :meth:`decode` is fastest with).
        """
        b, t = tokens.shape
        # the residual stream as rows [B*T, D]; reshaped to [B, H, T, Dh] only for attention
        x = (self.embed(tokens) + self.pos(positions)).reshape(b * t, -1)
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        mask = (causal[None] & valid[:, None, :])[:, None]
        cache = []
        for block in self.blocks:
            q, k, v = (_heads_major(a) for a in block._qkv_rows(x, b, t))
            x = block._finish_rows(x, _attention(q, k, v, mask), b, t)
            cache.append((k, v) if heads_major else (_heads_major(k), _heads_major(v)))
        logits = self.embed.attend(self.ln_f(x)).reshape(b, t, -1)
        return (logits, tuple(cache)) if return_cache else logits

    def grouped(self, prompts: jax.Array, prompt_valid: jax.Array, completions: jax.Array,
                group: int) -> jax.Array:
        """Logits ``[B*G, N, V]`` predicting every completion token, for ``B`` left-padded
        ``prompts [B, P]`` each followed by ``G = group`` completions (``completions [B*G,
        N]``, rows ordered ``b*G + g``): the causal pass of :meth:`__call__` over prompt +
        completion, with each prompt's pass run once and shared by its group's rows.

        Each layer runs the prompts' rows once and attends every completion row over its
        prompt's keys and values (repeated per group) and its own causal ones, so the linear
        layers see ``B*P + B*G*N`` rows instead of ``B*G*(P + N)``. The same numbers up to
        float rounding (the matmuls see other row counts); gradients reach the prompt's
        activations from all of its group's rows.
        """
        b, p = prompts.shape
        r, n = completions.shape
        valid = jnp.concatenate([prompt_valid, jnp.ones((b, n), bool)], axis=1)
        positions = positions_for(valid)
        x_prompt = (self.embed(prompts) + self.pos(positions[:, :p])).reshape(b * p, -1)
        x_rows = (self.embed(completions)
                  + jnp.repeat(self.pos(positions[:, p:]), group, axis=0)).reshape(r * n, -1)
        prompt_mask = (jnp.tril(jnp.ones((p, p), dtype=bool))[None]
                       & prompt_valid[:, None, :])[:, None]                  # [B, 1, P, P]
        row_mask = jnp.concatenate(                                          # [B*G, 1, N, P+N]
            [jnp.broadcast_to(jnp.repeat(prompt_valid, group, axis=0)[:, None, :], (r, n, p)),
             jnp.broadcast_to(jnp.tril(jnp.ones((n, n), dtype=bool))[None], (r, n, n))],
            axis=-1)[:, None]
        for block in self.blocks:
            q_p, k_p, v_p = (_heads_major(a) for a in block._qkv_rows(x_prompt, b, p))
            q, k, v = (_heads_major(a) for a in block._qkv_rows(x_rows, r, n))
            keys = jnp.concatenate([jnp.repeat(k_p, group, axis=0), k], axis=2)
            values = jnp.concatenate([jnp.repeat(v_p, group, axis=0), v], axis=2)
            x_rows = block._finish_rows(x_rows, _attention(q, keys, values, row_mask), r, n)
            x_prompt = block._finish_rows(x_prompt, _attention(q_p, k_p, v_p, prompt_mask), b, p)
        # the prompt's last position predicts the first completion token of every row
        first = self.embed.attend(self.ln_f(x_prompt.reshape(b, p, -1)[:, -1]))
        rest = self.embed.attend(self.ln_f(x_rows)).reshape(r, n, -1)[:, :-1]
        return jnp.concatenate([jnp.repeat(first, group, axis=0)[:, None], rest], axis=1)

    def decode(self, token: jax.Array, position: jax.Array, index: ArrayLike,
               cache: Sequence[tuple[jax.Array, jax.Array]], key_valid: jax.Array, *,
               heads_major: bool = False
               ) -> tuple[jax.Array, tuple[tuple[jax.Array, jax.Array], ...]]:
        """One cached step: ``token`` ``[B]`` at column ``index`` (scalar) -> logits ``[B, V]``.

        ``cache`` holds per-layer ``(k, v)`` ``[B, S, H, Dh]`` (``[B, H, S, Dh]`` with
        ``heads_major``: no transposes, about twice as fast); the new key/value is written at
        ``index``. ``key_valid`` ``[B, S]`` marks usable cache columns (including ``index``).
        Both layouts compute the same numbers.
        """
        b = token.shape[0]
        x = self.embed(token) + self.pos(position)   # rows [B, D]
        mask = key_valid[:, None, None, :]
        new_cache = []
        for block, (k_cache, v_cache) in zip(self.blocks, cache):
            q, k, v = (_heads_major(a) for a in block._qkv_rows(x, b, 1))
            if not heads_major:
                k_cache, v_cache = _heads_major(k_cache), _heads_major(v_cache)
            k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k, index, axis=2)
            v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v, index, axis=2)
            x = block._finish_rows(x, _attention(q, k_cache, v_cache, mask), b, 1)
            new_cache.append((k_cache, v_cache) if heads_major
                             else (_heads_major(k_cache), _heads_major(v_cache)))
        return self.embed.attend(self.ln_f(x)), tuple(new_cache)


# ----------------------------------------------------------------------------- functional API
@struct.dataclass
class Policy:
    """Pytree of a static config and the parameter state (vmappable over seeds)."""

    config: TransformerConfig = struct.field(pytree_node=False)
    params: Any


@functools.lru_cache(maxsize=None)
def graphdef(config: TransformerConfig) -> nnx.GraphDef[Transformer]:
    """The module structure for ``config`` (parameters are supplied separately)."""
    return nnx.split(nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0))))[0]


def init(key: jax.Array, config: TransformerConfig) -> Policy:
    """Fresh parameters from a typed PRNG key."""
    model = Transformer(config, rngs=nnx.Rngs(params=key))
    return Policy(config, nnx.state(model, nnx.Param))


def module(policy: Policy) -> Transformer:
    """The nnx module with ``policy``'s parameters (works on traced parameters)."""
    return nnx.merge(graphdef(policy.config), policy.params)


def positions_for(valid: jax.Array) -> jax.Array:
    """Positions counted from each row's first valid token (0 on left padding)."""
    return jnp.maximum(jnp.cumsum(valid.astype(jnp.int32), axis=-1) - 1, 0)


def _check_prompts(config, prompts, prompt_valid, max_new_tokens):
    prompts = jnp.asarray(prompts)
    if prompts.ndim != 2:
        raise ValueError(f"prompts must have shape [B, P]; got shape {prompts.shape}")
    if prompt_valid is None:
        prompt_valid = prompts != PAD_ID
    prompt_valid = jnp.asarray(prompt_valid, dtype=bool)
    if prompt_valid.shape != prompts.shape:
        raise ValueError(f"prompt_valid shape {prompt_valid.shape} != prompts shape "
                         f"{prompts.shape}")
    if prompts.shape[1] + max_new_tokens > config.max_len:
        raise ValueError(f"prompt width {prompts.shape[1]} + max_new_tokens={max_new_tokens} "
                         f"exceeds max_len={config.max_len}")
    return prompts.astype(jnp.int32), prompt_valid


class Rollout(NamedTuple):
    """Sampled completions, each ``[B, N]``; ``mask`` is True up to and including EOS."""

    tokens: jnp.ndarray
    logp: jnp.ndarray
    entropy: jnp.ndarray
    mask: jnp.ndarray


def _check_rows(rows, b: int) -> tuple[int, int]:
    lo, hi = rows
    if not 0 <= lo < hi <= b:
        raise ValueError(f"rows={tuple(rows)!r} is not allowed; it must be (lo, hi) with "
                         f"0 <= lo < hi <= {b} (the number of prompt rows)")
    return lo, hi


def row_cut(x, *, lo: int, size: int, start=None, axis: int = 0):
    """Rows ``lo..lo+size-1`` of ``x`` along ``axis``, shifted by a traced ``start`` when
    given (then one compiled program serves every range of that size; ``start + lo + size``
    must not pass the end, which ``dynamic_slice`` would clamp silently)."""
    if x is None:
        return None
    x = jnp.asarray(x)
    if start is None:
        return jax.lax.slice_in_dim(x, lo, lo + size, axis=axis)
    return jax.lax.dynamic_slice_in_dim(x, start + lo, size, axis=axis)


def _log_probs(logits, temperature):
    return jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, axis=-1)


def _entropy(logp):
    return -(jnp.exp(logp) * logp).sum(-1)


def _draw(key, logp, top_p):
    """Sample from ``exp(logp)`` restricted to the smallest top-p nucleus (top_p=1: all)."""
    return _draw_with(jax.random.gumbel(key, logp.shape, logp.dtype), logp, top_p)


def _draw_with(noise, logp, top_p):
    """:func:`_draw` given its Gumbel ``noise`` (``jax.random.categorical`` is exactly
    ``argmax(logits + gumbel(key))``, so drawing the noise of all steps in one call first
    gives the same tokens as one ``categorical`` call per step)."""
    if top_p >= 1.0:
        return jnp.argmax(logp + noise, axis=-1)
    order = jnp.argsort(-logp, axis=-1)
    sorted_lp = jnp.take_along_axis(logp, order, axis=-1)
    before = jnp.cumsum(jnp.exp(sorted_lp), axis=-1) - jnp.exp(sorted_lp)
    keep_sorted = before < top_p  # the top token always stays
    keep = jnp.zeros_like(keep_sorted).at[
        jnp.arange(logp.shape[0])[:, None], order].set(keep_sorted)
    return jnp.argmax(jnp.where(keep, logp, -jnp.inf) + noise, axis=-1)


@functools.partial(jit_cpu_options, options=DECODE_COMPILE,
                   static_argnames=("max_new_tokens", "top_p", "eos_id", "use_cache", "rows"))
def sample(key: jax.Array, policy: Policy, prompts: ArrayLike,
           prompt_valid: ArrayLike | None = None, *, max_new_tokens: int,
           temperature: ArrayLike = 1.0, top_p: float = 1.0, eos_id: int = EOS_ID,
           use_cache: bool = True, prefix: ArrayLike | None = None,
           prefix_len: ArrayLike | None = None, rows: tuple[int, int] | None = None,
           row_start: ArrayLike | None = None) -> Rollout:
    """Autoregressive sampling of ``max_new_tokens`` tokens after left-padded ``prompts``.

    ``key`` a typed PRNG key (step ``i`` uses ``fold_in(key, i)``, so cached and uncached
    sampling draw the same tokens); ``temperature`` may be traced; ``top_p`` is static.
    ``use_cache=False`` recomputes the whole buffer every step (reference/benchmark path).
    After EOS a row emits ``PAD`` with ``mask`` False and ``logp``/``entropy`` 0.

    ``prefix`` ``[B, N]`` with ``prefix_len`` ``[B]``: the first ``prefix_len`` completion
    tokens of each row are forced to ``prefix`` instead of drawn (resuming a partial response:
    the same causal computation as re-prefilling prompt + prefix); their ``logp``/``entropy``
    are the current policy's. Rows with ``prefix_len = 0`` are sampled exactly as without.

    ``row_start`` (may be traced) shifts ``rows`` by that many rows: ``rows=(0, n)`` with a
    traced ``row_start`` is one compiled program for every ``n``-row range.
    ``rows=(lo, hi)`` (static) computes only rows ``lo..hi-1`` of the batch, from the noise
    the whole batch would draw: the same tokens, and log-probs equal up to float rounding
    (XLA:CPU's matrix kernels round a row depending on the call's row count). Row ranges on
    separate host threads are how one seed's sampling uses several cores
    (:mod:`rlvr_lab.train.seed_threads`, which fixes the ranges by the row count alone).

    Speed (XLA:CPU): one prefill pass over the prompts writes a heads-major KV cache, the
    Gumbel noise of every step is drawn in one call before the loop, and each step is a few
    matmuls per layer plus one batched attention over the cache.
    """
    config = policy.config
    prompts, prompt_valid = _check_prompts(config, prompts, prompt_valid, max_new_tokens)
    if (prefix is None) != (prefix_len is None):
        raise ValueError("prefix and prefix_len must be given together")
    b, p = prompts.shape
    steps = jnp.arange(max_new_tokens)
    # the noise of step i is gumbel(fold_in(key, i)), as jax.random.categorical would draw it
    noise = jax.vmap(lambda i: jax.random.gumbel(jax.random.fold_in(key, i),
                                                 (b, config.vocab_size), jnp.float32))(steps)
    if rows is not None:
        lo, hi = _check_rows(rows, b)
        cut = functools.partial(row_cut, lo=lo, size=hi - lo, start=row_start)
        prompts, prompt_valid, prefix, prefix_len = map(
            cut, (prompts, prompt_valid, prefix, prefix_len))
        noise, b = row_cut(noise, lo=lo, size=hi - lo, start=row_start, axis=1), hi - lo
    total = p + max_new_tokens
    model = module(policy)
    valid = jnp.concatenate([prompt_valid, jnp.ones((b, max_new_tokens), bool)], axis=1)
    positions = positions_for(valid)
    buffer = jnp.concatenate([prompts, jnp.full((b, max_new_tokens), PAD_ID, jnp.int32)], axis=1)
    columns = jnp.arange(total)

    def choose(i, logits, noise_i, done):
        logp_all = _log_probs(logits, temperature)
        token = _draw_with(noise_i, logp_all, top_p)
        if prefix is not None:
            token = jnp.where(i < prefix_len, jnp.asarray(prefix, jnp.int32)[:, i], token)
        logp = jnp.take_along_axis(logp_all, token[:, None], axis=-1)[:, 0]
        live = ~done
        token = jnp.where(live, token, PAD_ID)
        return (token, jnp.where(live, logp, 0.0), jnp.where(live, _entropy(logp_all), 0.0),
                live, done | (token == eos_id))

    if use_cache:
        logits, prompt_cache = model(prompts, positions[:, :p], prompt_valid, return_cache=True,
                                     heads_major=True)
        pad = ((0, 0), (0, 0), (0, max_new_tokens), (0, 0))
        cache = tuple((jnp.pad(k, pad), jnp.pad(v, pad)) for k, v in prompt_cache)
        first = choose(0, logits[:, -1], noise[0], jnp.zeros((b,), bool))

        def step(carry, xs):
            cache, prev, done = carry
            i, noise_i = xs
            col = p + i - 1  # column of the previous token, now fed to the model
            key_valid = valid & (columns <= col)[None]
            logits, cache = model.decode(prev, positions[:, col], col, cache, key_valid,
                                         heads_major=True)
            token, logp, ent, live, done = choose(i, logits, noise_i, done)
            return (cache, token, done), (token, logp, ent, live)

        _, rest = jax.lax.scan(step, (cache, first[0], first[4]), (steps[1:], noise[1:]))
        outs = [jnp.concatenate([f[:, None], r.T], axis=1) for f, r in zip(first[:4], rest)]
    else:
        def step(carry, xs):
            buffer, done = carry
            i, noise_i = xs
            logits = model(buffer, positions, valid)[:, p + i - 1]
            token, logp, ent, live, done = choose(i, logits, noise_i, done)
            buffer = jax.lax.dynamic_update_slice_in_dim(buffer, token[:, None], p + i, axis=1)
            return (buffer, done), (token, logp, ent, live)

        _, rest = jax.lax.scan(step, (buffer, jnp.zeros((b,), bool)), (steps, noise))
        outs = [r.T for r in rest]
    tokens, logp, ent, live = outs
    return Rollout(tokens.astype(jnp.int32), logp, ent, live)


def completion_logits(policy: Policy, prompts: jax.Array, prompt_valid: ArrayLike,
                      completions: jax.Array, group: int | None = None) -> jax.Array:
    """Logits ``[B, N, V]`` predicting each completion token (one full causal pass; with
    ``group``, rows ``b*group + g`` share their prompt and its pass: :meth:`Transformer.
    grouped`)."""
    b, p = prompts.shape
    n = completions.shape[1]
    if group is not None:
        return module(policy).grouped(prompts[::group], jnp.asarray(prompt_valid)[::group],
                                      completions.astype(jnp.int32), group)
    tokens = jnp.concatenate([prompts, completions], axis=1).astype(jnp.int32)
    valid = jnp.concatenate([prompt_valid, jnp.ones((b, n), bool)], axis=1)
    logits = module(policy)(tokens, positions_for(valid), valid)
    return logits[:, p - 1:p + n - 1]


def score(policy: Policy, prompts: ArrayLike, prompt_valid: ArrayLike | None,
          completions: jax.Array, *, temperature: ArrayLike = 1.0,
          with_entropy: bool = False, group: int | None = None
          ) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Per-token log-probs ``[B, N]`` of ``completions`` under ``softmax(logits / T)``.

    Same layout as :func:`sample`; values at masked (post-EOS) tokens are meaningless and must
    be masked by the caller. With ``with_entropy`` also the per-token entropies.
    Differentiable in ``policy.params``; jit it (or call it inside a jitted function).

    ``group`` (static): the rows come in groups of ``group`` consecutive rows with the same
    prompt (a GRPO batch, rows ``b*group + g``); each prompt's pass then runs once for its
    group (:meth:`Transformer.grouped`): the same log-probs up to float rounding, with fewer
    FLOPs (the prompt's share of the pass, ``(group - 1) / group`` of it, is not repeated).
    Only the first row of each group's prompt is read: the caller guarantees the layout.
    """
    config = policy.config
    prompts, prompt_valid = _check_prompts(config, prompts, prompt_valid, completions.shape[1])
    if group is not None:
        _registry.positive_int("group", group)
        if prompts.shape[0] % group:
            raise ValueError(f"group={group} must divide the {prompts.shape[0]} rows")
    logp_all = _log_probs(completion_logits(policy, prompts, prompt_valid, completions, group),
                          temperature)
    logp = jnp.take_along_axis(logp_all, completions[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return (logp, _entropy(logp_all)) if with_entropy else logp
