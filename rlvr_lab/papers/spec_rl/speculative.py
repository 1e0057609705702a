"""SPEC-RL: speculative rollouts that reuse last epoch's responses (Liu et al. 2025).

When training revisits a prompt (the next epoch over a fixed prompt set), the response sampled
for it last time is a *draft*: it is verified under the current policy and its accepted
prefix is kept, so only the rest has to be generated. Per cached response (tokens, mask and the
log-probs ``pi_old`` of the policy that produced or last verified it):

1. **verify**: one batched forward of the current policy over prompt + cached response
   (:func:`rlvr_lab.models.transformer.score`) gives ``pi_new`` of every cached token;
2. **accept**: token ``t`` is accepted with probability ``min(1, l * pi_new / pi_old)``
   (uniform draw ``u_t``: accepted iff ``u_t < l * pi_new / pi_old``); the response is cut at
   the first rejection and the prefix before it is kept (:func:`first_rejection`);
3. **continue**: rows with a rejection are regenerated from the cut with the current policy;
   a response accepted up to its end (EOS, or the length budget) skips generation entirely.

The lenience ``l`` trades reuse for freshness: ``l = 1`` is the speculative-decoding rule,
``l -> inf`` reuses everything, the code's default is ``e^0.5``. Options here
(:func:`lenience_params`): ``"vanilla"`` (no reuse, ordinary sampling), a number ``l > 0``
(``math.inf`` = full reuse), and ``"random_cut"`` -- the paper's ablation that cuts each cached
response at ``floor(u * length)`` for one uniform ``u`` per row, independent of the
probabilities (as ``rand_reuse_all_cut`` in the reference code; it never skips a row).

**Pitfall (kept on purpose, as in the paper's code):** the token at the cut is resampled from
``pi_new`` itself, not from the residual ``max(0, pi_new - l * pi_old)`` that exact speculative
sampling would use. So even ``l = 1`` does not reproduce on-policy samples exactly: tokens that
``pi_new`` likes less than ``pi_old`` are kept with probability ``pi_new / pi_old`` *and*
can be redrawn after a rejection, a bias toward the old policy's choices. ``l > 1`` adds more.

**Outputs** (:class:`SpecRollout`): a :class:`~rlvr_lab.train.sequence.RolloutBatch` whose
``behav_logp`` holds the cached ``pi_old`` log-probs on reused tokens and the sampler's on new
ones (the trainer recomputes its own PPO old log-probs, as veRL does, so these only feed the
optional ``rollout_correction`` / ``track_mismatch``), ``stale`` flags the reused tokens (for
``SequenceRLConfig.mask_stale`` / corrections -- SPEC-RL itself trains on them uncorrected),
``cache_logp`` the log-probs under the *current* policy of every token of the final response
(verified ``pi_new`` on the prefix, the sampler's on new tokens) -- what the next epoch's
verification compares against, exactly like the reference code, which caches the
actor-recomputed ``old_log_probs`` of the whole final response -- and per-row ``generated`` /
``reused`` token counts with ``generated + reused = response length`` (tokens up to EOS).

**Batched and jitted, fixed shapes.** Continuing from per-row prefixes of different lengths is
done with the ordinary KV-cache sampler, the kept prefix forced token by token
(``transformer.sample(prefix=, prefix_len=)``, the mechanism APRIL's resumed partials use too).
Rows that need no generation are compacted away (``rows`` argument) so the decode
batch shrinks with reuse -- the fixed-shape analogue of an engine serving fewer requests.

**What "tokens saved" means at toy scale.** Responses here are ~5-12 tokens (a reversed-digit
scratchpad, ``>``, the answer, EOS), not thousands. ``generated`` counts the tokens a
continuous-batching engine would have to decode (up to EOS), the paper's "rollout tokens"; a
fixed-shape jitted decoder runs ``N`` steps for every row in its batch whatever the row needs,
so measured wall time drops only through whole rows skipped (and the decode batch compacted)
while the verification forward is paid on every revisited row. The reduction factor is also
capped by the number of epochs: epoch 1 has no cache and is always generated in full.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.typing import ArrayLike

from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.train import sequence, transformer_update
from rlvr_lab import random_streams as streams

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VANILLA = "vanilla"
RANDOM_CUT = "random_cut"
#: the paper's lenience sweep (plus vanilla and the random-cut ablation)
SWEEP = (VANILLA, 1.0, math.exp(0.2), math.exp(0.5), math.exp(1.0), math.exp(2.0), math.inf,
         RANDOM_CUT)


# ----------------------------------------------------------------------------- lenience
def check_lenience(lenience: str | float) -> None:
    """ValueError unless ``lenience`` is ``"vanilla"``, ``"random_cut"`` or a number > 0."""
    ok = isinstance(lenience, str) and lenience in (VANILLA, RANDOM_CUT)
    if not isinstance(lenience, (str, bool)) and isinstance(lenience, (int, float, np.number)):
        ok = bool(float(lenience) > 0)  # NaN compares False
    if not ok:
        raise ValueError(f"lenience={lenience!r} is not allowed; choose 'vanilla', 'random_cut' "
                         "or a number > 0 (math.inf for full reuse)")


def lenience_params(lenience: str | float) -> tuple[float, bool]:
    """``(log l, random_cut)`` for :func:`propose`: vanilla is ``l = 0`` (reject at token 0)."""
    check_lenience(lenience)
    if lenience == VANILLA:
        return -math.inf, False
    if lenience == RANDOM_CUT:
        return 0.0, True
    return math.log(float(lenience)), False


def lenience_label(lenience: str | float) -> str:
    """Short plot/table label: ``vanilla``, ``random-cut``, ``l=1``, ``e^0.5``, ``inf``."""
    check_lenience(lenience)
    if lenience == VANILLA:
        return "vanilla"
    if lenience == RANDOM_CUT:
        return "random-cut"
    value = float(lenience)
    if math.isinf(value):
        return "inf"
    if value == 1.0:
        return "l=1"
    log = math.log(value)
    if abs(log - round(log, 2)) < 1e-9:
        return f"e^{round(log, 2):g}"
    return f"l={value:.3g}"


# ----------------------------------------------------------------------------- acceptance
def first_rejection(u: ArrayLike, new_logp: ArrayLike, old_logp: ArrayLike, mask: jax.Array,
                    log_lenience: ArrayLike) -> jax.Array:
    """Cut positions ``[B]``: index of the first rejected token, or the length if none is.

    Token ``t`` (``mask`` True) is accepted iff ``u[t] < l * exp(new_logp[t] - old_logp[t])``
    for uniforms ``u`` in ``[0, 1)``, i.e. with probability ``min(1, l * pi_new / pi_old)``.
    ``log_lenience`` may be ``-inf`` (reject everything) or ``+inf`` (accept everything).
    """
    log_lenience = jnp.asarray(log_lenience, jnp.float32)
    threshold = jnp.where(jnp.isposinf(log_lenience), jnp.inf,
                          log_lenience + (new_logp - old_logp))
    accept = jnp.log(u) < threshold  # log 0 = -inf: never accepted at l = 0
    rejected = mask & ~accept
    length = mask.sum(-1).astype(jnp.int32)
    return jnp.where(rejected.any(-1), jnp.argmax(rejected, axis=-1).astype(jnp.int32), length)


def random_cut_positions(u_row: ArrayLike, mask: jax.Array) -> jax.Array:
    """The random-cut ablation: ``floor(u * length)`` per row, in ``[0, length - 1]``."""
    length = mask.sum(-1).astype(jnp.int32)
    cut = jnp.floor(u_row * length).astype(jnp.int32)
    return jnp.clip(cut, 0, jnp.maximum(length - 1, 0))


class CachedResponses(NamedTuple):
    """Last epoch's responses aligned with the rollout rows ``[R, N]`` (``filled`` ``[R]``)."""

    tokens: jnp.ndarray
    mask: jnp.ndarray
    logp: jnp.ndarray
    filled: jnp.ndarray  # False: no cached response yet (first visit) -> generate in full


class Proposal(NamedTuple):
    """Verification + acceptance result per row."""

    cut: jnp.ndarray        # [R] int: cached tokens kept (= length when fully accepted)
    full: jnp.ndarray       # [R] bool: fully accepted, no generation needed
    new_logp: jnp.ndarray   # [R, N] current policy's log-probs of the cached tokens
    entropy: jnp.ndarray    # [R, N] current policy's entropies there


def propose(key: jax.Array, policy: transformer.Policy, prompts: ArrayLike,
            prompt_valid: ArrayLike, cached: CachedResponses, log_lenience: ArrayLike,
            random_cut: ArrayLike, *, temperature: ArrayLike = 1.0) -> Proposal:
    """Verify the cached responses under ``policy`` (one forward) and choose the cuts.

    ``log_lenience`` and ``random_cut`` (bool) may be traced, so one compiled function serves
    a whole lenience sweep. Rows without a cache get ``cut = 0``.
    """
    new_logp, entropy = transformer.score(policy, prompts, prompt_valid, cached.tokens,
                                          temperature=temperature, with_entropy=True)
    u = jax.random.uniform(streams.stream(key, "token-acceptance"), cached.tokens.shape)
    u_row = jax.random.uniform(streams.stream(key, "row-acceptance"), cached.tokens.shape[:1])
    cut = jnp.where(random_cut, random_cut_positions(u_row, cached.mask),
                    first_rejection(u, new_logp, cached.logp, cached.mask, log_lenience))
    cut = jnp.where(cached.filled, cut, 0)
    full = cached.filled & (cut >= cached.mask.sum(-1))
    return Proposal(cut, full, new_logp, entropy)


# ----------------------------------------------------------------------------- continuation
def continue_from(key: jax.Array, policy: transformer.Policy, prompts: ArrayLike,
                  prompt_valid: ArrayLike, tokens: jax.Array, cut: jax.Array, *,
                  temperature: ArrayLike = 1.0, top_p: float = 1.0) -> transformer.Rollout:
    """Keep ``tokens[:, :cut]`` and sample the rest of each ``[R, N]`` response from ``policy``.

    The kept prefix is forced in :func:`rlvr_lab.models.transformer.sample` (``prefix`` /
    ``prefix_len``: the same causal computation as re-prefilling prompt + prefix). Returns the
    spliced responses (``mask`` True up to EOS; the prefix must hold no EOS, i.e. ``cut`` < the
    cached length) with the sampler's ``logp`` / ``entropy`` on new tokens and 0 on the prefix.
    """
    n = tokens.shape[1]
    out = transformer.sample(key, policy, prompts, prompt_valid, max_new_tokens=n,
                             temperature=temperature, top_p=top_p,
                             prefix=tokens.astype(jnp.int32), prefix_len=cut)
    fresh = jnp.arange(n)[None] >= cut[:, None]
    return out._replace(logp=jnp.where(fresh, out.logp, 0.0),
                        entropy=jnp.where(fresh, out.entropy, 0.0))


class SpecRollout(NamedTuple):
    batch: sequence.RolloutBatch  # behav_logp: cached pi_old on reused tokens; stale = reused
    cache_logp: jnp.ndarray       # [R, N] current-policy log-probs of the final responses
    generated: jnp.ndarray        # [R] new tokens (up to EOS)
    reused: jnp.ndarray           # [R] tokens kept from the cache
    cut: jnp.ndarray              # [R]
    full: jnp.ndarray             # [R] fully reused rows


def complete(key: jax.Array, policy: transformer.Policy, prompts: jax.Array,
             prompt_valid: jax.Array, cached: CachedResponses, proposal: Proposal, *,
             rows: int | None = None, temperature: ArrayLike = 1.0,
             top_p: float = 1.0) -> SpecRollout:
    """Generate from the cut for rows not fully accepted and splice everything together.

    ``rows`` (static) compacts the decode batch to that many rows (the rows needing generation
    come first; it must be >= their number -- :func:`rows_bucket`); ``None`` decodes all rows,
    ``0`` none (every row must then be fully accepted).
    """
    total = prompts.shape[0]
    need = ~proposal.full
    if rows == 0:  # nothing to generate: no decode at all
        zeros = jnp.zeros(cached.logp.shape, jnp.float32)
        cont = transformer.Rollout(cached.tokens, zeros, zeros, cached.mask)
    else:
        if rows is None or rows >= total:
            order = jnp.arange(total)
            rows = total
        else:
            order = jnp.argsort(~need, stable=True)[:rows]  # rows needing generation first
        rank = jnp.zeros(total, jnp.int32).at[order].set(jnp.arange(rows, dtype=jnp.int32))
        cont = continue_from(key, policy, prompts[order], prompt_valid[order],
                             cached.tokens[order], proposal.cut[order], temperature=temperature,
                             top_p=top_p)
        cont = jax.tree.map(lambda x: x[rank], cont)  # rows left out are all fully accepted
    full = proposal.full[:, None]
    tokens = jnp.where(full, cached.tokens, cont.tokens)
    mask = jnp.where(full, cached.mask, cont.mask)
    n = tokens.shape[1]
    reused_tok = jnp.arange(n)[None] < proposal.cut[:, None]
    reused_tok = (reused_tok | full) & mask
    behav = jnp.where(reused_tok, cached.logp, cont.logp)
    entropy = jnp.where(reused_tok, proposal.entropy, cont.entropy)
    cache_logp = jnp.where(reused_tok, proposal.new_logp, cont.logp)
    behav, entropy, cache_logp = (jnp.where(mask, x, 0.0) for x in (behav, entropy, cache_logp))
    reused = reused_tok.sum(-1).astype(jnp.int32)
    generated = mask.sum(-1).astype(jnp.int32) - reused
    batch = sequence.RolloutBatch(prompts, prompt_valid, tokens, mask, behav, entropy,
                                  stale=reused_tok)
    return SpecRollout(batch, cache_logp, generated, reused, proposal.cut, proposal.full)


def rows_bucket(num_need: int, total: int) -> int:
    """Decode-batch size for ``num_need`` rows: ``total / 4`` (rounded up) or ``total``, 0
    when nothing needs generating. Two shapes keep compilations few (each costs seconds on a
    CPU); a nearly fully reused batch still decodes only a quarter of its rows."""
    if num_need <= 0:
        return 0
    quarter = -(-total // 4)
    return quarter if num_need <= quarter else total


def speculative_rollout(key: jax.Array, policy: transformer.Policy, prompts: jax.Array,
                        prompt_valid: jax.Array, cached: CachedResponses, lenience: str | float, *,
                        temperature: ArrayLike = 1.0, top_p: float = 1.0) -> SpecRollout:
    """One speculative rollout of ``[R]`` rows (host convenience around :func:`propose` and
    :func:`complete`; it reads the number of rows to regenerate to size the decode batch)."""
    log_l, rnd = lenience_params(lenience)
    prop = _propose_jit(streams.stream(key, "propose"), policy, prompts, prompt_valid, cached,
                        log_l, rnd, temperature=temperature)
    rows = rows_bucket(int((~prop.full).sum()), prompts.shape[0])
    return _complete_jit(streams.stream(key, "complete"), policy, prompts, prompt_valid, cached,
                         prop, rows=rows, temperature=temperature, top_p=top_p)


_propose_jit = jax.jit(propose)
_complete_jit = jax.jit(complete, static_argnames=("rows", "top_p"))


# ----------------------------------------------------------------------------- the cache
class ResponseCache(NamedTuple):
    """Per prompt of the fixed set: its ``G`` last responses ``[K, G, N]`` and ``filled [K]``."""

    tokens: jnp.ndarray
    mask: jnp.ndarray
    logp: jnp.ndarray
    filled: jnp.ndarray


def empty_cache(num_prompts: int, num_generations: int, length: int) -> ResponseCache:
    shape = (num_prompts, num_generations, length)
    return ResponseCache(jnp.zeros(shape, jnp.int32), jnp.zeros(shape, bool),
                         jnp.zeros(shape, jnp.float32), jnp.zeros((num_prompts,), bool))


def cache_lookup(cache: ResponseCache, idx: ArrayLike) -> CachedResponses:
    """Cached responses of prompts ``idx [B]`` as rollout rows ``[B*G, N]`` (rows b*G + g)."""
    g = cache.tokens.shape[1]
    flat = lambda x: x[idx].reshape((-1,) + x.shape[2:])  # noqa: E731
    return CachedResponses(flat(cache.tokens), flat(cache.mask), flat(cache.logp),
                           jnp.repeat(cache.filled[idx], g))


def cache_store(cache: ResponseCache, idx: jax.Array, tokens: jax.Array, mask: jax.Array,
                logp: jax.Array) -> ResponseCache:
    """Write rows ``[B*G, N]`` back for prompts ``idx [B]``."""
    b = idx.shape[0]
    shaped = lambda x: x.reshape((b, -1) + x.shape[1:])  # noqa: E731
    return ResponseCache(cache.tokens.at[idx].set(shaped(tokens).astype(jnp.int32)),
                         cache.mask.at[idx].set(shaped(mask)),
                         cache.logp.at[idx].set(shaped(logp)),
                         cache.filled.at[idx].set(True))


# ----------------------------------------------------------------------------- training
@dataclasses.dataclass(frozen=True)
class SpecRLConfig:
    """GRPO over a fixed prompt set for ``epochs`` epochs with speculative rollouts.

    ``rl`` supplies the GRPO settings (``num_prompts`` per step, ``num_generations``, loss,
    optimiser, evaluation); its ``steps`` / ``eval_every`` are unused -- the run is
    ``epochs * num_train_prompts / num_prompts`` steps over prompts ``0..K-1`` of the trainer's
    pool, in the same fixed batches every epoch (so last epoch's responses exist).
    """

    rl: sequence.SequenceRLConfig = sequence.SequenceRLConfig()
    lenience: Any = math.exp(0.5)
    num_train_prompts: int = 48
    epochs: int = 8

    def __post_init__(self):
        check_lenience(self.lenience)
        for name in ("num_train_prompts", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; it must be an int >= 1")
        if self.num_train_prompts % self.rl.num_prompts:
            raise ValueError(f"num_train_prompts={self.num_train_prompts} must be a multiple of "
                             f"rl.num_prompts={self.rl.num_prompts}")

    @property
    def batches_per_epoch(self) -> int:
        return self.num_train_prompts // self.rl.num_prompts

    @property
    def steps(self) -> int:
        return self.epochs * self.batches_per_epoch


class _Clock:
    """Accumulates wall and process-CPU seconds over ``with`` blocks."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def __enter__(self):
        self._start = (time.perf_counter(), time.process_time())

    def __exit__(self, *exc):
        self.wall += time.perf_counter() - self._start[0]
        self.cpu += time.process_time() - self._start[1]

    @property
    def totals(self):
        return self.wall, self.cpu


class SpecRun(NamedTuple):
    state: sequence.TrainState
    history: dict             # metric -> [steps, S]
    heldout: np.ndarray       # [S, eval_samples] final held-out pass@k, k = 1..n
    train_pass1: np.ndarray   # [S] final policy on the training prompts, fresh samples
    seconds: float


class SpecDriver:
    """Jitted pieces for one :class:`SpecRLConfig` (any lenience: it is a traced argument).

    Seeds are a leading axis (``transformer_update.seed_mapped``). Rollout wall time is
    measured with compilation excluded: a decode-batch shape seen for the first time is
    compiled (and run once) before the clock starts, as an engine would capture its shapes up
    front.
    """

    def __init__(self, config: SpecRLConfig, trainer: sequence.Trainer | None = None):
        self.config = config
        rl = config.rl
        self.trainer = trainer or sequence.Trainer(rl)
        if len(self.trainer.pool) < config.num_train_prompts:
            raise ValueError(f"num_train_prompts={config.num_train_prompts} exceeds the pool "
                             f"of {len(self.trainer.pool)} training problems")
        self.problems = self.trainer.pool[:config.num_train_prompts]
        self.prompts = self.trainer.pool_prompts[:config.num_train_prompts]
        self.valid = self.trainer.pool_valid[:config.num_train_prompts]
        # the training-prompt evaluation reuses the held-out evaluation's compiled shape:
        # ``rows // K`` samples per prompt, the leftover rows (copies of prompt 0) ignored
        rows = self.trainer.eval_prompts.shape[0]
        self._train_reps = max(rows // config.num_train_prompts, 1)
        order = np.arange(max(rows, config.num_train_prompts)) % config.num_train_prompts
        order[self._train_reps * config.num_train_prompts:] = 0
        self._train_eval = (self.prompts[order], self.valid[order])
        g, t, top_p = rl.num_generations, rl.temperature, rl.top_p

        def fresh(key, policy, prompts, valid):
            return sequence.rollout(key, policy, prompts, valid, rl)

        def verify(key, policy, prompts, valid, cache, idx, log_l, rnd):
            cached = cache_lookup(cache, idx)
            prop = propose(key, policy, jnp.repeat(prompts, g, 0), jnp.repeat(valid, g, 0),
                           cached, log_l, rnd, temperature=t)
            return prop, (~prop.full).sum()

        def finish(key, policy, prompts, valid, cache, idx, prop, rows):
            cached = cache_lookup(cache, idx)
            return complete(key, policy, jnp.repeat(prompts, g, 0), jnp.repeat(valid, g, 0),
                            cached, prop, rows=rows, temperature=t, top_p=top_p)

        seeds = (0, 0, None, None)
        self._fresh = transformer_update.seed_mapped(fresh, seeds)
        self._verify = transformer_update.seed_mapped(verify, seeds + (0, None, None, None))
        self._finish = transformer_update.seed_mapped(finish, seeds + (0, None, 0, None),
                                                      static_argnums=7)
        self._store = jax.jit(jax.vmap(cache_store, in_axes=(0, None, 0, 0, 0)))
        self._seen: set = set()

    def _untimed_once(self, name, fn, *args):
        """Compile (and run once) ``fn`` for a shape not seen before, outside any timing."""
        if name not in self._seen:
            jax.block_until_ready(fn(*args))
            self._seen.add(name)

    def rollout(self, keys: jax.Array, state: sequence.TrainState, idx: jax.Array,
                cache: ResponseCache, lenience: str | float, epoch: int
                ) -> tuple[SpecRollout, tuple[float, float]]:
        """One rollout phase for prompts ``idx [B]`` -> ``(SpecRollout, (wall s, cpu s))``.

        The CPU seconds (this process, all threads) are less disturbed than wall time by other
        jobs on a shared machine; both exclude compilation.
        """
        clock = _Clock()
        prompts, valid = self.prompts[idx], self.valid[idx]
        k_fresh = streams.each(keys, streams.ROLLOUT)
        if lenience == VANILLA or epoch == 0:
            self._untimed_once("fresh", self._fresh, k_fresh, state.policy, prompts, valid)
            with clock:
                batch = jax.block_until_ready(self._fresh(k_fresh, state.policy, prompts, valid))
            lengths = batch.mask.sum(-1).astype(jnp.int32)
            shape = lengths.shape
            out = SpecRollout(batch._replace(stale=jnp.zeros_like(batch.mask)), batch.behav_logp,
                              lengths, jnp.zeros_like(lengths), jnp.zeros(shape, jnp.int32),
                              jnp.zeros(shape, bool))
            return out, clock.totals
        log_l, rnd = lenience_params(lenience)
        k_acc = streams.each(keys, "speculative-acceptance")
        args = (k_acc, state.policy, prompts, valid, cache, idx, log_l, rnd)
        self._untimed_once("verify", self._verify, *args)
        with clock:
            prop, need = self._verify(*args)
            need = int(np.max(np.asarray(need)))  # host sync: size the decode batch
            rows = rows_bucket(need, prop.full.shape[-1])
        fargs = (k_fresh, state.policy, prompts, valid, cache, idx, prop, rows)
        self._untimed_once(("finish", rows), self._finish, *fargs)
        with clock:
            out = jax.block_until_ready(self._finish(*fargs))
        return out, clock.totals

    def base_pass1(self, key: jax.Array, num_seeds: int) -> tuple[np.ndarray, np.ndarray]:
        """``(held-out, training-prompt)`` pass@1 ``[S]`` of the SFT base, with the same
        evaluation keys as the final evaluation of :meth:`train`."""
        state = self.trainer.init_state(num_seeds)
        return (self.trainer.evaluate(key, state, self.config.steps)[:, 0],
                self.train_pass1(key, state))

    def train(self, key: jax.Array, lenience: str | float, num_seeds: int = 1, *,
              verbose: bool = False) -> SpecRun:
        """GRPO with speculative rollouts; same ``key`` -> same numbers for every lenience up
        to the first revisit (epoch 1 is identical across a sweep: common random numbers)."""
        check_lenience(lenience)
        cfg, tr = self.config, self.trainer
        rl = cfg.rl
        start = time.perf_counter()
        state = tr.init_state(num_seeds)
        n = rl.base.max_new_tokens
        cache = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_seeds,) + x.shape),
                             empty_cache(cfg.num_train_prompts, rl.num_generations, n))
        history: dict[str, list] = {}
        b = rl.num_prompts
        for step in range(cfg.steps):
            epoch, j = divmod(step, cfg.batches_per_epoch)
            idx = jnp.arange(j * b, (j + 1) * b)
            keys = tr.step_keys(key, step, num_seeds)
            spec, (seconds, cpu) = self.rollout(keys, state, idx, cache, lenience, epoch)
            cache = self._store(cache, idx, spec.batch.tokens, spec.batch.mask, spec.cache_logp)
            pool_idx = np.broadcast_to(np.asarray(idx), (num_seeds, b))
            rewards, correct = tr.verify(pool_idx, spec.batch.tokens)
            k_upd = streams.each(keys, streams.UPDATE)
            state, metrics = tr.update_from_batch(k_upd, state, spec.batch, rewards)
            record = {
                "epoch": np.full(num_seeds, epoch),
                "generated": np.asarray(spec.generated).sum(-1),
                "reused": np.asarray(spec.reused).sum(-1),
                "response_tokens": np.asarray(spec.batch.mask).sum((-2, -1)),
                "full_reuse_frac": np.asarray(spec.full).mean(-1),
                "mean_cut": np.asarray(spec.cut).mean(-1),
                "rollout_seconds": np.full(num_seeds, seconds),
                "rollout_cpu_seconds": np.full(num_seeds, cpu),
                "pass1": correct.mean(axis=(1, 2)),
                "reward": np.asarray(metrics["reward"]),
                "entropy": np.asarray(metrics["entropy"]),
            }
            for name, value in record.items():
                history.setdefault(name, []).append(np.asarray(value, float))
            if verbose:
                print(f"{lenience_label(lenience)} step {step}: generated "
                      f"{record['generated'].mean():.0f} reused {record['reused'].mean():.0f} "
                      f"pass1 {record['pass1'].mean():.3f} rollout {seconds * 1e3:.0f} ms")
        heldout = tr.evaluate(key, state, cfg.steps)
        return SpecRun(state, {k: np.stack(v) for k, v in history.items()}, heldout,
                       self.train_pass1(key, state), time.perf_counter() - start)

    def train_pass1(self, key: jax.Array, state: sequence.TrainState) -> np.ndarray:
        """pass@1 ``[S]`` of fresh samples (about ``eval_samples * eval_problems / K`` per prompt)
        on the training prompts:
        the in-distribution quality (the per-step ``pass1`` of a run with reuse scores the
        reused, possibly stale responses instead)."""
        cfg, tr = self.config, self.trainer
        num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        keys = streams.each(tr.step_keys(key, cfg.steps, num_seeds), "train-prompt-evaluation")
        tokens = np.asarray(tr._eval(keys, state.policy, *self._train_eval))
        k, reps = len(self.problems), self._train_reps
        allow = tr.config.allow_truncated_completions
        return np.array([tasks.score_completions(self.problems, row[:reps * k].reshape(
            reps, k, -1), allow_truncated=allow)[1].mean() for row in tokens])


def run(config: SpecRLConfig, key: jax.Array, num_seeds: int = 1, *,
        driver: SpecDriver | None = None, verbose: bool = False) -> SpecRun:
    """Train ``num_seeds`` seeds with ``config.lenience`` (see :meth:`SpecDriver.train`)."""
    return (driver or SpecDriver(config)).train(key, config.lenience, num_seeds,
                                                verbose=verbose)


def run_frame(run: SpecRun, lenience: str | float) -> pd.DataFrame:
    """Per (seed, step) rows of a run; ``heldout_pass1`` / ``train_pass1_final`` (final policy,
    fresh samples) are filled on the final step only."""
    frames = []
    steps, seeds = run.history["generated"].shape
    for s in range(seeds):
        df = pd.DataFrame({k: v[:, s] for k, v in run.history.items()})
        df.insert(0, "step", np.arange(steps))
        df.insert(0, "seed", s)
        for name, value in (("heldout_pass1", run.heldout[s, 0]),
                            ("train_pass1_final", run.train_pass1[s])):
            df[name] = np.nan
            df.loc[steps - 1, name] = float(value)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    log_l, rnd = lenience_params(lenience)
    out.insert(0, "log_lenience", np.nan if rnd else log_l)
    out.insert(0, "lenience", lenience_label(lenience))
    return out


def run_sweep(config: SpecRLConfig, key: jax.Array, lenience_values: Sequence[str | float] = SWEEP,
              num_seeds: int = 2, *,
              driver: SpecDriver | None = None, verbose: bool = False) -> pd.DataFrame:
    """Train every lenience in ``lenience_values`` from the same base, prompt set and key.

    Returns long-form per-step rows (see :func:`run_frame`) plus the SFT base's pass@1 per
    seed (``base_heldout_pass1``, ``base_train_pass1``; same evaluation keys as the final
    evaluations); :func:`summarize` reduces them to per (lenience, seed) totals and
    :func:`figure` plots them.
    """
    for value in lenience_values:
        check_lenience(value)
    driver = driver or SpecDriver(config)
    frames = [run_frame(driver.train(key, value, num_seeds, verbose=verbose), value)
              for value in lenience_values]
    df = pd.concat(frames, ignore_index=True)
    heldout, train = driver.base_pass1(key, num_seeds)
    df["base_heldout_pass1"] = df.seed.map(dict(enumerate(heldout)))
    df["base_train_pass1"] = df.seed.map(dict(enumerate(train)))
    return df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per (lenience, seed): total generated / reused tokens, rollout seconds, final held-out
    and training-prompt pass@1 (fresh samples), the token / time reduction vs vanilla (whole
    run, and ``revisit_token_reduction`` over epochs 2+ where a cache exists)."""
    groups = df.groupby(["lenience", "seed"], sort=False)
    out = groups.agg(log_lenience=("log_lenience", "first"), generated=("generated", "sum"),
                     reused=("reused", "sum"), rollout_seconds=("rollout_seconds", "sum"),
                     rollout_cpu_seconds=("rollout_cpu_seconds", "sum"),
                     heldout_pass1=("heldout_pass1", "max"),
                     train_pass1_final=("train_pass1_final", "max")).reset_index()
    for name in ("base_heldout_pass1", "base_train_pass1"):
        if name in df:
            out[name] = groups[name].first().values
    revisits = df[df.epoch > 0].groupby(["lenience", "seed"], sort=False)
    out["generated_revisits"] = revisits.generated.sum().values
    if (out.lenience == "vanilla").any():
        base = out[out.lenience == "vanilla"].set_index("seed")
        out["token_reduction"] = out.seed.map(base.generated) / out.generated
        out["revisit_token_reduction"] = (out.seed.map(base.generated_revisits)
                                          / out.generated_revisits.clip(lower=1))
        out["time_speedup"] = out.seed.map(base.rollout_seconds) / out.rollout_seconds
        out["cpu_time_speedup"] = (out.seed.map(base.rollout_cpu_seconds)
                                   / out.rollout_cpu_seconds)
    return out


def figure(df: pd.DataFrame) -> Figure:
    """Generated tokens per step for each lenience; token reduction and quality vs lenience."""
    from rlvr_lab import plotting

    summary = summarize(df)
    labels = list(dict.fromkeys(df.lenience))
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for i, label in enumerate(labels):
        sub = df[df.lenience == label].pivot(index="seed", columns="step", values="generated")
        steps, values = sub.columns.values, sub.values
        (line,) = ax.plot(steps, values.mean(0), label=label, color=f"C{i % 10}",
                          ls="--" if label == "random-cut" else "-")
        ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.15,
                        lw=0)
    ax.set(xlabel="RL step", ylabel="generated tokens per step",
           title="rollout tokens actually decoded (mean, seed range)")
    ax.set_yscale("symlog", linthresh=10)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    # x axis of the summary panels: vanilla, then increasing lenience, random-cut last
    present = [label for label in labels if label != "random-cut"] + [
        label for label in labels if label == "random-cut"]
    xs = np.arange(len(present))

    def errorbars(ax, name, color, label, shift=0.0):
        stats = [plotting.mean_ci(summary[summary.lenience == t][name].values) for t in present]
        ax.errorbar(xs + shift, [s[0] for s in stats], [s[1] for s in stats], marker="o",
                    color=color, label=label, capsize=3, ls="none")

    ax = axes[1]
    if "token_reduction" in summary:
        for shift, (name, color, label) in zip((-0.1, 0.0, 0.1), (
                ("token_reduction", "C0", "generated tokens"),
                ("time_speedup", "C3", "rollout wall time"),
                ("cpu_time_speedup", "C4", "rollout CPU time"))):
            errorbars(ax, name, color, label, shift)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(ylabel="vanilla / this (x, mean, 95% CI)", title="tokens and time saved")
        ax.legend(fontsize=8)
    ax.set_xticks(xs, present, rotation=30)
    ax = axes[2]
    for shift, (name, base, color, label) in zip((-0.08, 0.08), (
            ("heldout_pass1", "base_heldout_pass1", "C2", "held-out"),
            ("train_pass1_final", "base_train_pass1", "C1", "training prompts"))):
        errorbars(ax, name, color, f"{label} (final policy)", shift)
        if base in summary:
            ax.axhline(summary.groupby("seed")[base].first().mean(), color=color, ls=":",
                       lw=1, label=f"{label} (SFT base)")
    ax.set_xticks(xs, present, rotation=30)
    ax.set(ylabel="pass@1, fresh samples (mean, 95% CI)",
           title="quality vs lenience (paper: inverted U)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig
