"""Teacher-forced pre-training and the post-training arms of SAR (arXiv:2512.06421).

Every arm trains with Adam on fresh batches of the exact law. The arms follow the authors'
public training code (its ``training_mode`` options), where it differs from a reading of the
abstract the code wins:

* ``tf`` -- **teacher forcing**: one forward pass on the ground-truth pyramid, the mean
  per-token cross-entropy ``CE_TF`` (every scale, every token, as VAR) -- also the
  pre-training step;
* ``sar`` -- **Stagger-Scale Rollout + Contrastive Student-Forcing Loss** (code:
  ``csfl``): the teacher-forced pass gives, for every scale ``k`` at once, the model's
  one-step prediction of scale ``k`` from the ground-truth coarser scales; drawing tokens from
  it (the rollout's randomness option: ``rollout_temperature`` 1 samples, 0 takes the argmax)
  and shifting them one scale down as inputs gives a *staggered* pyramid in which every scale
  sees the model's own prediction of its parent scale. A second forward pass on it (the one
  extra pass) gives student-forced logits, supervised with the **ground-truth** tokens; the
  teacher-forced loss of the same batch is the anchor:
  ``L = CE_TF + lambda * CE_SF`` (``CE_SF`` over the scales after the first, whose input --
  the class -- is the same in both passes);
* ``student`` -- **full student forcing** (code: ``student_forcing``): the contexts come from
  a free-running generation of the whole pyramid (one pass per scale), every scale's tokens
  supervised with the ground truth, no teacher-forced term;
* ``alternating`` -- **alternating schedule** (code: ``alternating``): within one step the
  scales alternate -- even scales teacher-forced, odd scales fed the model's one-step
  prediction of their parent -- in one mean over all tokens.

``csfl_target="teacher"`` (arm ``sar_distill``) replaces the ground-truth target of the
student pass with the teacher-forced prediction of the same position (a distillation reading
of "anchored on the teacher-forced path"); kept as an ablation, not the paper's method.

Arms of one seed share the pre-trained model, every batch and every random draw (paired).
:func:`make_chunk` returns a jitted ``lax.scan`` over steps, ``vmap``-ped over seeds.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.typing import ArrayLike

from rlvr_lab._registry import check_choice, positive_int
from rlvr_lab.papers.sar import data
from rlvr_lab.papers.sar import model

ROLLOUTS = ("none", "ssr", "full")
TARGETS = ("teacher", "ground_truth")


@dataclass(frozen=True)
class Arm:
    """One post-training recipe. ``rollout``: ``none`` (teacher forcing only), ``ssr`` (one-step
    staggered rollout), ``full`` (free-running rollout of all scales). The loss of step ``t``
    is ``tf_weight[t % 2] * CE_TF + sf_weight[t % 2] * CE_SF``; with ``alternate_scales`` the
    teacher-forced term covers the even scales and the student term the odd ones, both
    normalised by the total token count (one mean over the pyramid)."""

    name: str
    rollout: str = "none"
    tf_weight: tuple[float, float] = (1.0, 1.0)
    sf_weight: tuple[float, float] = (0.0, 0.0)
    csfl_target: str = "ground_truth"
    rollout_temperature: float = 1.0
    alternate_scales: bool = False

    def __post_init__(self):
        check_choice("rollout", self.rollout, ROLLOUTS)
        check_choice("csfl_target", self.csfl_target, TARGETS)
        for name in ("tf_weight", "sf_weight"):
            w = getattr(self, name)
            if (len(w) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                   or not v >= 0 for v in w)):
                raise ValueError(f"{name}={w!r} must be two numbers >= 0 (even, odd steps)")
        t = self.rollout_temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
            raise ValueError(f"rollout_temperature={t!r} must be a number >= 0 (0 = argmax)")
        if self.rollout == "none" and any(self.sf_weight):
            raise ValueError(f"sf_weight={self.sf_weight!r} needs a rollout; rollout='none'")
        if not isinstance(self.alternate_scales, bool):
            raise ValueError(f"alternate_scales={self.alternate_scales!r} must be True or False")
        if self.alternate_scales and self.rollout != "ssr":
            raise ValueError(f"alternate_scales=True needs rollout='ssr', got "
                             f"{self.rollout!r}")


def arms(csfl_weight: float = 1.0, temperature: float = 1.0) -> dict[str, Arm]:
    """The arms of the study (see the module docstring); ``sar_argmax`` is SAR without the
    rollout's randomness (argmax one-step predictions), ``sar_distill`` the teacher-target
    ablation."""
    lam, t = float(csfl_weight), float(temperature)
    return {
        "tf": Arm("tf"),
        "sar": Arm("sar", "ssr", sf_weight=(lam, lam), rollout_temperature=t),
        "sar_argmax": Arm("sar_argmax", "ssr", sf_weight=(lam, lam), rollout_temperature=0.0),
        "sar_distill": Arm("sar_distill", "ssr", sf_weight=(lam, lam), csfl_target="teacher",
                           rollout_temperature=t),
        "student": Arm("student", "full", tf_weight=(0.0, 0.0), sf_weight=(1.0, 1.0),
                       rollout_temperature=t),
        "alternating": Arm("alternating", "ssr", sf_weight=(1.0, 1.0), rollout_temperature=t,
                           alternate_scales=True),
    }


@dataclass(frozen=True)
class TrainConfig:
    """Sizes and optimiser. ``pretrain_steps`` of teacher forcing at ``pretrain_lr``, then
    ``post_steps`` of each arm at ``post_lr`` (Adam state carried over, gradients clipped at
    norm ``clip``)."""

    batch_size: int = 64
    pretrain_steps: int = 1500
    post_steps: int = 500
    pretrain_lr: float = 3e-3
    post_lr: float = 1e-3
    clip: float = 1.0

    def __post_init__(self):
        for name in ("batch_size", "pretrain_steps", "post_steps"):
            positive_int(name, getattr(self, name))
        for name in ("pretrain_lr", "post_lr", "clip"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name}={v!r} must be a number > 0")

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


# ----------------------------------------------------------------------------- losses
def token_ce(logits: ArrayLike, targets: ArrayLike) -> jax.Array:
    """Per-token cross-entropy (nats) of integer ``targets`` under ``logits``: ``[B, T]``."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets)


def soft_ce(target_logits: ArrayLike, logits: ArrayLike) -> jax.Array:
    """Per-token ``CE(softmax(target_logits), softmax(logits))``, target gradient stopped."""
    p = jax.nn.softmax(jax.lax.stop_gradient(target_logits), -1)
    return optax.softmax_cross_entropy(logits, p)


def per_scale_mean(values: jax.Array, scales: Sequence[int]) -> jax.Array:
    """``[..., T]`` per-token values -> ``[..., S]`` means over each scale's tokens."""
    onehot = jnp.asarray(np.eye(len(scales))[data.block_ids(scales)] / np.asarray(scales)[
        data.block_ids(scales)][:, None])                                  # [T, S]
    return values @ onehot


class Knobs(NamedTuple):
    """An :class:`Arm` as arrays, so one compiled step serves every arm: ``mode`` 0/1/2 for
    rollout none/ssr/full (a ``lax.cond``/``lax.switch`` on an unbatched scalar runs only the
    chosen branch, so a teacher-forcing step does not pay for the student pass)."""

    mode: jax.Array          # [] int32
    tf_weight: jax.Array     # [2] float32, by step parity
    sf_weight: jax.Array     # [2]
    teacher: jax.Array       # [] bool, the student target is the teacher-forced prediction
    temperature: jax.Array   # [] rollout temperature (0 = argmax)
    tf_mask: jax.Array       # [T] float32, positions of the teacher-forced term
    sf_mask: jax.Array       # [T] float32, positions of the student term
    tf_norm: jax.Array       # [] token count each term is divided by
    sf_norm: jax.Array       # []


def knobs(arm: Arm, scales: Iterable[int]) -> Knobs:
    """``arm`` as :class:`Knobs` for a law with token-map sizes ``scales``."""
    blocks = data.block_ids(tuple(scales))
    every = np.ones(blocks.shape, np.float32)
    if arm.alternate_scales:
        tf_mask, sf_mask = (blocks % 2 == 0).astype(np.float32), (blocks % 2 == 1).astype(
            np.float32)
        tf_norm = sf_norm = float(blocks.size)
    else:
        # the first scale's input (the class) is the same in both passes: a staggered pass
        # adds nothing there; a free-running rollout supervises every scale
        sf_mask = every if arm.rollout == "full" else (blocks > 0).astype(np.float32)
        tf_mask, tf_norm, sf_norm = every, float(blocks.size), float(sf_mask.sum())
    return Knobs(jnp.asarray(ROLLOUTS.index(arm.rollout), jnp.int32),
                 jnp.asarray(arm.tf_weight, jnp.float32), jnp.asarray(arm.sf_weight, jnp.float32),
                 jnp.asarray(arm.csfl_target == "teacher"),
                 jnp.asarray(arm.rollout_temperature, jnp.float32), jnp.asarray(tf_mask),
                 jnp.asarray(sf_mask), jnp.asarray(tf_norm, jnp.float32),
                 jnp.asarray(max(sf_norm, 1.0), jnp.float32))


class StepInfo(NamedTuple):
    loss: jax.Array          # [] the optimised loss
    ce_tf: jax.Array         # [S] teacher-forced CE per scale
    ce_sf: jax.Array         # [S] CE of the ground truth under the student-forced pass
    csfl: jax.Array          # [S] CSFL term per scale (0 without a rollout)
    grad_norm: jax.Array     # []


def make_loss(graphdef: nnx.GraphDef, law: data.LawConfig
              ) -> Callable[..., tuple[jax.Array, StepInfo]]:
    """``loss(params, uniforms, classes, flat, t, knobs) -> (loss, StepInfo)``; ``uniforms``
    ``[S, B, T, levels]`` drive the rollout (``[0]`` for SSR, all but the last for a full
    rollout)."""
    scales = law.scales
    S = len(scales)
    blocks = jnp.asarray(data.block_ids(scales))

    def full_context(params, u, classes, temperature):
        def body(k, flat):
            logits = model.forward(graphdef, params, classes, flat)
            return jnp.where(blocks[None] == k, model.gumbel_argmax(u[k], logits, temperature),
                             flat)
        return jax.lax.fori_loop(0, S - 1, body, jnp.zeros(u.shape[1:3], jnp.int32))

    def loss(params, u, classes, flat, t, kn: Knobs):
        logits_tf = model.forward(graphdef, params, classes, flat)
        ce = token_ce(logits_tf, flat)                                   # [B, T]
        ce_tf = (ce * kn.tf_mask).sum(-1).mean() / kn.tf_norm

        def student(params):
            frozen = jax.lax.stop_gradient(params)
            ctx = jax.lax.cond(
                kn.mode == 2, lambda: full_context(frozen, u, classes, kn.temperature),
                lambda: model.gumbel_argmax(u[0], jax.lax.stop_gradient(logits_tf), kn.temperature))
            logits_sf = model.forward(graphdef, params, classes, ctx)
            term = jnp.where(kn.teacher, soft_ce(logits_tf, logits_sf),
                             token_ce(logits_sf, flat))
            return term * kn.sf_mask, token_ce(logits_sf, flat)

        def no_student(params):
            return jnp.zeros_like(ce), jnp.zeros_like(ce)

        parity = t % 2
        # no student pass when the arm has no rollout or its weight is 0 this step
        run_student = (kn.mode > 0) & (kn.sf_weight[parity] > 0)
        term, ce_sf = jax.lax.cond(run_student, student, no_student, params)
        csfl = term.sum(-1).mean() / kn.sf_norm
        total = kn.tf_weight[parity] * ce_tf + kn.sf_weight[parity] * csfl
        info = StepInfo(total, per_scale_mean(ce, scales).mean(0),
                        per_scale_mean(jax.lax.stop_gradient(ce_sf), scales).mean(0),
                        per_scale_mean(jax.lax.stop_gradient(term), scales).mean(0), 0.0)
        return total, info

    return loss


# ----------------------------------------------------------------------------- training
class State(NamedTuple):
    params: nnx.State
    opt_state: optax.OptState


def optimizer(lr: ArrayLike, clip: float) -> optax.GradientTransformation:
    """Adam on the flattened parameter vector (one update op instead of one per array),
    gradients clipped at global norm ``clip``. The state does not depend on ``lr`` (a traced
    value is fine), so pre-training and post-training share one compiled step."""
    return optax.flatten(optax.chain(optax.clip_by_global_norm(clip), optax.scale_by_adam(),
                                     optax.scale(-lr)))


def make_init(model_cfg: model.ModelConfig, law: data.LawConfig, cfg: TrainConfig
              ) -> tuple[nnx.GraphDef, Callable[[jax.Array], State]]:
    """``(graphdef, init)``: jitted ``init(keys [S]) -> State`` (one model and Adam state per
    seed)."""
    graphdef, _ = model.graphdef_and_shapes(model_cfg, law)
    opt = optimizer(cfg.pretrain_lr, cfg.clip)

    def one(key):
        _, params = model.init(key, model_cfg, law)
        return State(params, opt.init(params))

    return graphdef, jax.jit(jax.vmap(one))


def make_chunk(graphdef: nnx.GraphDef, law_cfg: data.LawConfig, law: data.Law, cfg: TrainConfig,
               steps: int) -> Callable[..., tuple[State, StepInfo]]:
    """Jitted ``chunk(state, data_keys [S], t0, knobs, lr) -> (state, StepInfo [S, steps])``:
    ``steps`` steps of the arm given by ``knobs`` from global step ``t0`` for every seed. The
    batch and the rollout draws of global step ``t`` come from ``fold_in(data_key, t)``, so
    the arms of a seed see the same data and random numbers."""
    positive_int("steps", steps)
    loss = make_loss(graphdef, law_cfg)
    rows = jnp.asarray(law.flat)
    classes = jnp.asarray(law.classes)
    cdf = jnp.asarray(np.cumsum(law.probs) / law.probs.sum(), jnp.float32)
    B, S, T, K = cfg.batch_size, law_cfg.num_scales, law_cfg.seq_len, law_cfg.levels

    def step(data_key, kn, lr, state, t):
        k_data, k_roll = jax.random.split(jax.random.fold_in(data_key, t))
        idx = jnp.minimum(jnp.searchsorted(cdf, jax.random.uniform(k_data, (B,))),
                          rows.shape[0] - 1)
        u = jax.random.uniform(k_roll, (S, B, T, K))
        (_, info), grads = jax.value_and_grad(loss, has_aux=True)(
            state.params, u, classes[idx], rows[idx], t, kn)
        updates, opt_state = optimizer(lr, cfg.clip).update(grads, state.opt_state,
                                                            state.params)
        params = optax.apply_updates(state.params, updates)
        return State(params, opt_state), info._replace(grad_norm=optax.global_norm(grads))

    def chunk(state, data_key, t0, kn, lr):
        return jax.lax.scan(lambda s, t: step(data_key, kn, lr, s, t), state,
                            t0 + jnp.arange(steps))

    return jax.jit(jax.vmap(chunk, in_axes=(0, 0, None, None, None)))



def forward_passes(graphdef: nnx.GraphDef, params: nnx.State, law_cfg: data.LawConfig,
                   law: data.Law, arm_list: Sequence[Arm], batch_size: int = 4,
                   key: jax.Array | None = None) -> dict[str, float]:
    """Model forward passes per training batch of each arm (``params``: one model), counted
    as they execute: the loss is compiled once with a host callback in every pass and run on
    one batch at an even and at an odd step; the mean of the two. Backward passes are not
    counted."""
    loss = make_loss(graphdef, law_cfg)
    key = jax.random.key(0) if key is None else key
    k_data, k_u = jax.random.split(key)
    classes, flat = data.sample(k_data, law, batch_size)
    u = jax.random.uniform(k_u, (law_cfg.num_scales, batch_size, law_cfg.seq_len,
                                 law_cfg.levels))

    def value(params, t, kn):
        return loss(params, u, classes, flat, t, kn)[0]

    probe = model.instrument(value, params, jnp.int32(0), knobs(arm_list[0], law_cfg.scales))
    return {arm.name: 0.5 * sum(model.count_executed(probe, params, jnp.int32(t),
                                                         knobs(arm, law_cfg.scales))
                                for t in (0, 1)) for arm in arm_list}
