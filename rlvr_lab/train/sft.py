"""Supervised warm start of the tiny transformer on generated reference solutions.

``load_or_train(config)`` returns the SFT base policy: it trains from scratch (the whole loop
is one jitted ``lax.scan``; deterministic for ``config.seed``) and caches the parameters in
``<cache>/sft/<config hash>.ckpt`` (see :mod:`rlvr_lab.train.checkpoint`; no pickle). A
corrupted or mismatched file is reported in one line and rebuilt.

Imperfect demonstrations (``flawed_fraction``): that share of the training problems carries
the task's flawed worked solution (:func:`rlvr_lab.envs.tasks.flawed_solution`: arithmetic drops
every carry, search scans one digit too far) instead of the reference. The base then learns the
right procedure and a systematic, well-formed error side by side, and samples each with about
the share seen in SFT -- a gap between pass@1 and pass@k that a verifier-driven update can
close quickly. This is what makes the small model a positive control for RL: with correct-only
demonstrations, a base stopped early fails from missing capability, which 100 GRPO steps
cannot add (measured: +0.02 held-out pass@1 after 200 steps, dipping first).

:data:`PRESETS` (all d_model=64, 2 layers, 400 SFT steps):

- ``"quick"``: arithmetic, 1-2 digit sums, 70% of the demonstrations flawed. The model's
  capability: 0.88 held-out pass@1 with correct-only demonstrations. Measured on one CPU (4
  seeds, 64 held-out problems x 4 samples, 95% t-intervals): base pass@1 ~0.49; GRPO
  (``tiny_grpo``'s settings) -> 0.73 after 10 steps, 0.78 after 20, 0.79 after 40 (+0.30
  [+0.23, +0.38]). With 50% flawed: base 0.62 (0.26 of the samples carry-dropping, 0.10 other
  errors), +0.18 [+0.10, +0.26] after 40 steps.
- ``"search"``: :mod:`rlvr_lab.envs.search` with positions up to 8 (heavy-tailed response
  lengths, 3-11 tokens): base pass@1 ~0.36, 0.30 of the samples overshoot by one digit.
- ``"default"``: the earlier moderate base (1-4 digit sums, correct demonstrations only,
  d_model=128), kept for reference; no experiment uses it.

float32 SFT is not bitwise reproducible across CPU types; the RL effect these presets give is
large compared with that variation, so no claim depends on one particular base.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from rlvr_lab import io
from rlvr_lab.envs import tasks, tokenizer
from rlvr_lab.models import transformer
from rlvr_lab.train import checkpoint
from rlvr_lab.train.config import SFT_CHECKS, check_fields
from rlvr_lab import random_streams as streams

FORMAT_VERSION = 2  # bump when the training code changes what a config produces


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    """Task, model size and SFT schedule (all static)."""

    task: str = "arithmetic"
    difficulties: tuple[int, ...] = (1, 2, 3, 4)
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    num_train: int = 20_000
    num_heldout: int = 256
    gen_slack: int = 4
    seed: int = 0
    flawed_fraction: float = 0.0


    def __post_init__(self):
        tasks.task_module(self.task)
        check_fields(self, SFT_CHECKS)  # one line per bad field (bools, 2.5, nan, inf)
        object.__setattr__(self, "difficulties", tuple(int(d) for d in self.difficulties))
        if not self.difficulties:
            raise ValueError("difficulties=() is not allowed; give at least one level")
        for name in ("steps", "batch_size", "num_train", "num_heldout"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed; must be >= 1")
        for name in ("warmup_steps", "gen_slack"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed; must be >= 0")
        if not 0.0 <= self.flawed_fraction <= 1.0:
            raise ValueError(f"flawed_fraction={self.flawed_fraction!r} is not allowed; must be "
                             "in [0, 1]")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate!r} is not allowed; must be > 0")
        tasks.generate(self.task, np.random.default_rng(0), 1, self.difficulties)  # validates
        self.model_config()  # validates the architecture

    @property
    def prompt_width(self) -> int:
        return tasks.widths(self.task, self.difficulties)[0]

    @property
    def solution_width(self) -> int:
        return tasks.widths(self.task, self.difficulties)[1]

    @property
    def max_new_tokens(self) -> int:
        """Generation budget: the longest reference solution plus ``gen_slack`` tokens."""
        return self.solution_width + self.gen_slack

    def model_config(self) -> transformer.TransformerConfig:
        return transformer.TransformerConfig(
            vocab_size=tokenizer.VOCAB_SIZE, max_len=self.prompt_width + self.max_new_tokens,
            d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads)

    def hash(self) -> str:
        return checkpoint.config_hash({"sft": dataclasses.asdict(self), "version": FORMAT_VERSION})


PRESETS = {
    # ~0.1M parameters, 1-2 digit sums, 70% of the demonstrations drop every carry; ~25 s
    "quick": SFTConfig(difficulties=(1, 2), d_model=64, n_layers=2, n_heads=4, steps=400,
                       batch_size=64, num_train=8_000, num_heldout=128, flawed_fraction=0.7),
    # the heavy-tailed task: linear search, positions 1..8 with P(k) ~ 1/k; half the
    # demonstrations scan one digit too far
    "search": SFTConfig(task="search", difficulties=(3,), d_model=64, n_layers=2, n_heads=4,
                        steps=400, batch_size=64, num_train=8_000, num_heldout=128, gen_slack=2,
                        flawed_fraction=0.5),
    # ~0.6M parameters, 1-4 digit sums, correct demonstrations only (unused by experiments)
    "default": SFTConfig(),
}


# ----------------------------------------------------------------------------- data
def problems(config: SFTConfig, split: str) -> list[tasks.Problem]:
    """Deterministic ``"train"`` / ``"heldout"`` problems (held-out prompts never in train)."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split={split!r} is not allowed; choose 'train' or 'heldout'")
    heldout = tasks.generate(config.task, np.random.default_rng([config.seed, 1]),
                             config.num_heldout, config.difficulties)
    if split == "heldout":
        return heldout
    seen = {p.prompt for p in heldout}
    train = tasks.generate(config.task, np.random.default_rng([config.seed, 0]),
                           config.num_train, config.difficulties)
    train = [p for p in train if p.prompt not in seen]
    if config.flawed_fraction > 0:
        flip = np.random.default_rng([config.seed, 3]).random(len(train)) < config.flawed_fraction
        train = [dataclasses.replace(p, solution=tasks.flawed_solution(p)) if f else p
                 for p, f in zip(train, flip)]
    return train


def encode(config: SFTConfig, probs: Sequence[tasks.Problem]) -> tasks.Batch:
    return tasks.encode(probs, config.prompt_width, config.solution_width)


# ----------------------------------------------------------------------------- training
def sft_loss(policy: transformer.Policy, prompts: ArrayLike, prompt_valid: ArrayLike,
             solutions: jax.Array, solution_mask: jax.Array) -> jax.Array:
    """Mean negative log-likelihood of the solution tokens (incl. EOS)."""
    logp = transformer.score(policy, prompts, prompt_valid, solutions)
    m = solution_mask.astype(logp.dtype)
    return -(logp * m).sum() / jnp.maximum(m.sum(), 1)


def make_optimizer(config: SFTConfig) -> optax.GradientTransformation:
    warmup = max(min(config.warmup_steps, config.steps - 1), 1)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, config.learning_rate, warmup, max(config.steps, warmup + 1),
        config.learning_rate * 0.1)
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(schedule, b2=0.98, weight_decay=config.weight_decay))


def train(config: SFTConfig) -> tuple[transformer.Policy, jax.Array]:
    """Train from scratch; returns ``(policy, losses [steps])`` (deterministic)."""
    enc = encode(config, problems(config, "train"))
    n = enc.prompts.shape[0]
    # Each base's training set has its own size (held-out prompts are filtered out), so the
    # data enter padded to ``num_train`` rows with the true size ``n`` as an argument: every
    # base of a preset runs one program, which the persistent compile cache shares between
    # bases (closure constants would make one program per base). Rows past ``n`` are never
    # drawn, and randint draws the same indices whether ``n`` is static or traced.
    data = jax.tree.map(lambda x: jnp.asarray(np.pad(x, [(0, config.num_train - n)]
                                                     + [(0, 0)] * (x.ndim - 1))), enc)
    key = jax.random.key(config.seed)
    policy = transformer.init(streams.stream(key, "init"), config.model_config())
    opt = make_optimizer(config)

    @jax.jit
    def run(policy, batch_key, data, n):
        def step(carry, k):
            policy, opt_state = carry
            idx = jax.random.randint(k, (config.batch_size,), 0, n)
            loss, grads = jax.value_and_grad(sft_loss)(
                policy, data.prompts[idx], data.prompt_valid[idx], data.solutions[idx],
                data.solution_mask[idx])
            updates, opt_state = opt.update(grads, opt_state, policy)
            return (optax.apply_updates(policy, updates), opt_state), loss

        keys = jax.random.split(batch_key, config.steps)
        (policy, _), losses = jax.lax.scan(step, (policy, opt.init(policy)), keys)
        return policy, losses

    return run(policy, streams.stream(key, "sft-steps"), data, jnp.asarray(n, jnp.int32))


def checkpoint_path(config: SFTConfig) -> Path:
    return checkpoint.cache_dir() / "sft" / f"{config.task}-{config.hash()}.ckpt"


def load_or_train(config: SFTConfig, *, use_cache: bool = True,
                  verbose: bool = True) -> transformer.Policy:
    """The SFT base policy for ``config``: from the cache if valid, else trained and cached."""
    if not use_cache:
        return _load_or_train(config, use_cache, verbose)
    # processes that need the same base (parallel experiments, test workers) take turns: the
    # second one loads what the first trained
    with io.file_lock(checkpoint_path(config).with_suffix(".lock")):
        return _load_or_train(config, use_cache, verbose)


def _load_or_train(config: SFTConfig, use_cache: bool, verbose: bool):
    template = transformer.init(jax.random.key(0), config.model_config())
    path = checkpoint_path(config)
    if use_cache and path.exists():
        try:
            return checkpoint.load(path, template, {"config_hash": config.hash()})
        except checkpoint.CheckpointError as err:
            warnings.warn(f"SFT checkpoint rejected ({err}); retraining", stacklevel=2)
    start = time.perf_counter()
    policy, losses = train(config)
    losses = np.asarray(losses)
    if verbose:
        print(f"SFT {config.task} d={config.d_model} L={config.n_layers}: {config.steps} steps in "
              f"{time.perf_counter() - start:.1f} s, final loss {losses[-20:].mean():.3f}")
    if use_cache:
        checkpoint.save(path, policy, {"config_hash": config.hash(),
                                       "config": dataclasses.asdict(config),
                                       "final_loss": float(losses[-20:].mean())})
    return policy


# ----------------------------------------------------------------------------- evaluation
class Evaluation(NamedTuple):
    counts: np.ndarray        # [M] correct samples per problem
    n: int                    # samples per problem
    rewards: np.ndarray       # [n, M]
    lengths: np.ndarray       # [n, M] generated tokens (incl. EOS)
    texts: list               # first sample of each problem, decoded

    @property
    def pass1(self) -> float:
        return float(self.counts.mean() / self.n)

    def pass_at(self, k: int) -> float:
        from rlvr_lab import metrics
        return float(np.mean(np.asarray(metrics.pass_at_k(self.n, self.counts, k))))


def evaluate(key: jax.Array, policy: transformer.Policy, config: SFTConfig,
             probs: Sequence[tasks.Problem], *, n_samples: int = 1, temperature: float = 1.0,
             top_p: float = 1.0, scheme: str = "binary") -> Evaluation:
    """Sample ``n_samples`` completions per problem and verify them on the host."""
    batch = encode(config, probs)
    prompts = jnp.tile(jnp.asarray(batch.prompts), (n_samples, 1))
    valid = jnp.tile(jnp.asarray(batch.prompt_valid), (n_samples, 1))
    out = transformer.sample(key, policy, prompts, valid, max_new_tokens=config.max_new_tokens,
                             temperature=temperature, top_p=top_p)
    tokens = np.asarray(out.tokens).reshape(n_samples, len(probs), -1)
    rewards, correct = tasks.score_completions(probs, tokens, scheme)
    return Evaluation(counts=correct.sum(0), n=n_samples, rewards=rewards,
                      lengths=np.asarray(out.mask).sum(-1).reshape(n_samples, len(probs)),
                      texts=tokenizer.decode_batch(tokens[0]))
