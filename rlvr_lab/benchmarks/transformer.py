"""Tiny-transformer performance: KV-cache sampling speed-up and train-step MFU.

- ``transformer_kv_cache``: time to sample 128 new tokens with the KV cache vs recomputing the
  whole buffer every step (same jitted sampler, ``use_cache=False``); ratio = uncached/cached.
- ``transformer_train_mfu``: model FLOPs per second of one jitted SFT train step (forward +
  backward + Adam; model FLOPs = 3 x forward matmul/attention FLOPs) divided by the FLOP/s
  of a large float32 matmul measured in the same run -- model FLOPs utilisation as a fraction.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from rlvr_lab.benchmarks import Measure, benchmark, best_time
from rlvr_lab.models import transformer

NEW_TOKENS = 128


def _prompts(batch: int, width: int, vocab: int):
    ids = jax.random.randint(jax.random.key(1), (batch, width), 3, vocab)
    return ids.at[:, 0].set(1)


@benchmark("transformer_kv_cache")
def kv_cache(quick: bool) -> Measure:
    batch, d, layers = (8, 64, 2) if quick else (32, 128, 4)
    prompt = 16
    cfg = transformer.TransformerConfig(vocab_size=25, max_len=prompt + NEW_TOKENS, d_model=d,
                                        n_layers=layers, n_heads=4)
    policy = transformer.init(jax.random.key(0), cfg)
    prompts = _prompts(batch, prompt, cfg.vocab_size)
    times = {}
    for use_cache in (True, False):
        def go(use_cache=use_cache):
            return jax.block_until_ready(transformer.sample(
                jax.random.key(2), policy, prompts, max_new_tokens=NEW_TOKENS, eos_id=-1,
                use_cache=use_cache))
        go()
        times[use_cache] = best_time(go, repeats=2)
    ratio = times[False] / times[True]
    return Measure("transformer_kv_cache", ratio,
                   f"{NEW_TOKENS} new tokens, batch {batch}, d={d} L={layers}, prompt {prompt}: "
                   f"cached {times[True] * 1e3:.0f} ms vs recompute {times[False] * 1e3:.0f} ms; "
                   f"{jax.devices()[0].platform}")


def matmul_peak(n: int = 2048, repeats: int = 3, dtype: str = "float32") -> float:
    """FLOP/s of an ``n x n`` matmul of ``dtype`` operands with a float32 result (best of
    ``repeats``; for bfloat16 the fastest kernel, as the linear layers use it)."""
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    f = jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32))
    jax.block_until_ready(f(a, b))
    return 2.0 * n ** 3 / best_time(lambda: jax.block_until_ready(f(a, b)), repeats)


@benchmark("transformer_train_mfu")
def train_mfu(quick: bool) -> Measure:
    batch, seq, d, layers = (32, 64, 128, 2) if quick else (64, 64, 256, 4)
    cfg = transformer.TransformerConfig(vocab_size=25, max_len=seq, d_model=d, n_layers=layers,
                                        n_heads=4)
    policy = transformer.init(jax.random.key(0), cfg)
    prompts = _prompts(batch, seq // 2, cfg.vocab_size)
    completions = _prompts(batch, seq // 2, cfg.vocab_size)
    opt = optax.adam(1e-3)

    @jax.jit
    def step(policy, opt_state):
        def loss(p):
            return -transformer.score(p, prompts, None, completions).mean()
        grads = jax.grad(loss)(policy)
        updates, opt_state = opt.update(grads, opt_state, policy)
        return optax.apply_updates(policy, updates), opt_state

    state = (policy, opt.init(policy))
    jax.block_until_ready(step(*state))
    seconds = best_time(lambda: jax.block_until_ready(step(*state)), 3 if quick else 5)
    flops = 3.0 * batch * seq * cfg.flops_per_token(seq)
    peak = matmul_peak(1024 if quick else 2048)
    mfu = flops / seconds / peak
    return Measure("transformer_train_mfu", mfu,
                   f"MFU {mfu:.1%} of the matmul peak; batch {batch} x {seq} tokens, "
                   f"d={d} L={layers}: "
                   f"{flops / seconds / 1e9:.1f} GFLOP/s model vs {peak / 1e9:.1f} GFLOP/s "
                   f"matmul peak; {jax.devices()[0].platform}")
