"""One config vocabulary for both settings: per-field validation and TRL / verl aliases.

A trainer config is a frozen dataclass decorated with :func:`rl_config`. Each field declares
its checks (``option(default, positive_int)``), run at construction, so a bad value fails at
once with one line naming the value and what is allowed. Keyword names from TRL and verl are
translated to the canonical field (``ALIASES``); an unknown name, or two spellings of one
option with different values, is one ValueError.

Canonical names (the same in the bank and the transformer trainer):
``steps``, ``num_prompts`` (prompts per step), ``num_generations`` (rollouts per prompt),
``advantage`` + ``scale_rewards`` + ``advantage_options``, ``policy_loss`` + ``epsilon`` +
``epsilon_high`` + ``clip_ratio_c``, ``loss_agg_mode``, ``beta`` + ``kl_estimator``,
``num_iterations`` x ``num_minibatches``, ``rollout`` + ``rollout_options``,
``mask_truncated_completions``, ``allow_truncated_completions``. The table with every alias is ``docs/config.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np

from rlvr_lab import _registry

if TYPE_CHECKING:
    from rlvr_lab.train.rollout import RolloutStage

_T = TypeVar("_T")

# TRL's loss_type picks the policy loss *and* the aggregation (TRL GRPOConfig):
# grpo normalises per sequence, bnpo/dapo per token, dr_grpo by a constant B * T.
TRL_LOSS_TYPES = {
    "grpo": ("ppo_clip", "seq-mean-token-mean"),
    "bnpo": ("ppo_clip", "token-mean"),
    "dapo": ("ppo_clip", "token-mean"),
    "dr_grpo": ("ppo_clip", "seq-mean-token-sum-norm"),
    "cispo": ("cispo", "token-mean"),
}
# verl's kl_loss_type names -> our KL estimators
VERL_KL_TYPES = {"kl": "k1", "k1": "k1", "abs": None, "mse": "k2", "k2": "k2",
                 "low_var_kl": "k3", "k3": "k3"}
SCALE_REWARDS = ("group", "batch", "none")


def _trl_loss_type(value):
    if value not in TRL_LOSS_TYPES:
        raise ValueError(f"loss_type={value!r} is not allowed; choose one of "
                         f"{', '.join(map(repr, TRL_LOSS_TYPES))} (TRL's names; the policy "
                         "loss itself is policy_loss)")
    loss, agg = TRL_LOSS_TYPES[value]
    return {"policy_loss": loss, "loss_agg_mode": agg}


def _verl_kl_type(value):
    if VERL_KL_TYPES.get(value) is None:
        raise ValueError(f"kl_loss_type={value!r} is not allowed; choose one of "
                         f"{', '.join(repr(k) for k, v in VERL_KL_TYPES.items() if v)}")
    return {"kl_estimator": VERL_KL_TYPES[value]}


def _rename(field: str) -> Callable[[Any], dict]:
    return lambda value: {field: value}


# alias -> function of the value returning {canonical field: value}; (source) for the docs
ALIASES: dict[str, tuple[Callable[[Any], dict], str]] = {
    # TRL GRPOConfig
    "loss_type": (_trl_loss_type, "TRL"),
    "max_steps": (_rename("steps"), "TRL"),
    # verl (actor_rollout_ref.actor / algorithm / data / rollout)
    "clip_ratio": (_rename("epsilon"), "verl"),
    "clip_ratio_low": (_rename("epsilon"), "verl"),
    "clip_ratio_high": (_rename("epsilon_high"), "verl"),
    "rollout.n": (_rename("num_generations"), "verl"),
    "rollout_n": (_rename("num_generations"), "verl"),
    "ppo_epochs": (_rename("num_iterations"), "verl"),
    "kl_loss_coef": (_rename("beta"), "verl"),
    "kl_loss_type": (_verl_kl_type, "verl"),
    "train_batch_size": (_rename("num_prompts"), "verl"),
    # earlier rlvr_lab spellings (deprecated)
    "num_steps": (_rename("steps"), "rlvr_lab < 0.2"),
    "batch_size": (_rename("num_prompts"), "rlvr_lab < 0.2"),
    "loss": (_rename("policy_loss"), "rlvr_lab < 0.2"),
    "advantage_kwargs": (_rename("advantage_options"), "rlvr_lab < 0.2"),
}


def _normalise_value(name: str, value):
    """TRL's boolean ``scale_rewards`` (True = per group, False = none)."""
    if name == "scale_rewards" and isinstance(value, (bool, np.bool_)):
        return "group" if value else "none"
    return value


def translate(cls, kwargs: dict) -> dict:
    """Map alias keywords to ``cls``'s fields; one ValueError for unknown or conflicting ones."""
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    out: dict = {}
    origin: dict = {}
    for name, value in kwargs.items():
        if name in fields:
            pairs = {name: value}
        elif name in ALIASES:
            pairs = ALIASES[name][0](value)
        else:
            raise ValueError(f"unknown option {name!r} for {cls.__name__}; valid: "
                             f"{', '.join(sorted(fields))} (and the aliases in docs/config.md)")
        for field, v in pairs.items():
            if field not in fields:
                raise ValueError(f"option {name!r} (-> {field}) does not apply to "
                                 f"{cls.__name__}")
            v = _normalise_value(field, v)
            if field in out and not _same(out[field], v):
                raise ValueError(f"{name}={value!r} conflicts with {origin[field]}="
                                 f"{kwargs[origin[field]]!r} (both set {field})")
            out[field], origin[field] = v, name
    return out


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - arrays etc.: treat as different
        return a is b


# ----------------------------------------------------------------------------- field checks
def option(default: Any, *checks: Callable[[str, Any], None], **field_kwargs: Any) -> Any:
    """A dataclass field whose value must pass every check ``check(name, value)``."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults need default_factory")
    return dataclasses.field(default=default, metadata={"checks": checks}, **field_kwargs)


def _is_number(value) -> bool:
    return (not isinstance(value, (bool, np.bool_))
            and isinstance(value, (int, float, np.integer, np.floating)))


def _integer(name, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; it must be an integer >= {minimum}")


def positive_int(name: str, value: Any) -> None:
    _integer(name, value, 1)


MAX_ROLLOUTS = 2**24   # rollouts per step: index arithmetic stays far inside int32
MAX_STEPS = 2**31 - 1  # step counters are int32 on the device


def check_rollouts(config: Any) -> None:
    """One-line ValueError when ``num_prompts * num_generations`` exceeds
    :data:`MAX_ROLLOUTS` (``num_generations=10**9`` would overflow inside JAX) or ``steps``
    exceeds :data:`MAX_STEPS`."""
    b, g = config.num_prompts, config.num_generations
    if b * g > MAX_ROLLOUTS:
        raise ValueError(f"num_prompts*num_generations={b}*{g}={b * g} is not allowed; at most "
                         f"{MAX_ROLLOUTS} rollouts per step")
    if config.steps > MAX_STEPS:
        raise ValueError(f"steps={config.steps} is not allowed; at most {MAX_STEPS}")


def non_negative_int(name: str, value: Any) -> None:
    _integer(name, value, 0)


def _real(name, value, ok: Callable[[float], bool], what: str):
    if not _is_number(value) or not math.isfinite(value) or not ok(value):
        raise ValueError(f"{name}={value!r} is not allowed; it must be a finite number {what}")


def positive(name: str, value: Any) -> None:
    _real(name, value, lambda v: v > 0, "> 0")


def non_negative(name: str, value: Any) -> None:
    _real(name, value, lambda v: v >= 0, ">= 0")


def below_one(name: str, value: Any) -> None:
    _real(name, value, lambda v: 0 <= v < 1, "in [0, 1)")


def unit_interval(name: str, value: Any) -> None:
    _real(name, value, lambda v: 0 <= v <= 1, "in [0, 1]")


def open_unit_interval(name: str, value: Any) -> None:
    _real(name, value, lambda v: 0 < v <= 1, "in (0, 1]")


def above_one(name: str, value: Any) -> None:
    _real(name, value, lambda v: v > 1, "> 1")


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r} is not allowed; it must be True or False")


def optional(check: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
    """``check`` unless the value is None."""
    def run(name, value):
        if value is not None:
            check(name, value)
    return run


def choice(*allowed: Any) -> Callable[[str, Any], None]:
    def run(name, value):
        _registry.check_choice(name, value, allowed)
    return run


def registered(category: str, *also: type) -> Callable[[str, Any], None]:
    """A name registered in ``category``, a callable, or an instance of one of ``also``."""
    def run(name, value):
        if callable(value) or (also and isinstance(value, also)):
            return
        _registry.category(category).get(value)
    return run


def pairs(name: str, value: Any) -> None:
    """A tuple of ``(name, value)`` pairs (hashable keyword options)."""
    if not isinstance(value, tuple) or not all(
            isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) for o in value):
        raise ValueError(f"{name}={value!r} must be a tuple of (name, value) pairs")


def positive_ints(name: str, value: Any) -> None:
    if not isinstance(value, tuple) or not value:
        raise ValueError(f"{name}={value!r} must be a non-empty tuple of positive integers")
    for v in value:
        positive_int(f"{name} entry", v)


def strings(name: str, value: Any) -> None:
    """A non-empty tuple of names."""
    if not isinstance(value, tuple) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}={value!r} is not allowed; it must be a non-empty tuple of "
                         "names")


def integers(minimum: int) -> Callable[[str, Any], None]:
    """A non-empty tuple or list of integers >= ``minimum`` (bools and 1.5 are not)."""
    def run(name, value):
        if not isinstance(value, (tuple, list)) or not value:
            raise ValueError(f"{name}={value!r} is not allowed; it must be a non-empty tuple "
                             f"of integers >= {minimum}")
        for v in value:
            _integer(f"{name} entry", v, minimum)
    return run


def instance_of(*types: type) -> Callable[[str, Any], None]:
    def run(name, value):
        if not isinstance(value, types):
            raise ValueError(f"{name}={value!r} is not allowed; it must be a "
                             f"{' or '.join(t.__name__ for t in types)}")
    return run


def validate(obj: Any) -> None:
    """Run every field's declared checks (in field order), then the option checks of
    :func:`check_options`."""
    for f in dataclasses.fields(obj):
        for check in f.metadata.get("checks", ()):
            check(f.name, getattr(obj, f.name))
    check_options(obj)


def check_fields(obj: Any, table: dict) -> None:
    """Run ``table[field](field, value)`` for a dataclass not built with :func:`rl_config`."""
    for name, check in table.items():
        check(name, getattr(obj, name))


# checks of rlvr_lab.train.sft.SFTConfig (the task and the architecture are checked there)
SFT_CHECKS: dict[str, Callable] = {
    "difficulties": integers(1), "d_model": positive_int, "n_layers": positive_int,
    "n_heads": positive_int, "steps": positive_int, "batch_size": positive_int,
    "learning_rate": positive, "warmup_steps": non_negative_int, "weight_decay": non_negative,
    "num_train": positive_int, "num_heldout": positive_int, "gen_slack": non_negative_int,
    "seed": non_negative_int, "flawed_fraction": unit_interval,
}


# ----------------------------------------------------------------------------- option checks
def check_options(obj: Any) -> None:
    """``advantage_options`` and ``rollout_options`` against what the chosen estimator and
    rollout stage accept, for a config that has those fields.

    Names: an estimator's keyword parameters after ``rewards, mask``
    (:func:`rlvr_lab.advantages.options`); a stage's keyword parameters of ``init`` and
    ``sample`` after their positional ``(sampler, shape)`` / ``(key, sampler, shape, state)``
    (a stage reads its options through named parameters; ``**options`` alone declares none).
    Values of estimator options: one call of the estimator on a 1 x 2 batch, which runs its
    own checks (e.g. ``eps >= 0``, ``scale`` a known choice). Stage values are checked by the
    stage when the trainer is built.
    """
    names = {f.name for f in dataclasses.fields(obj)}
    if {"advantage", "advantage_options"} <= names and obj.advantage_options:
        _check_estimator_options(obj.advantage, obj.advantage_options)
    if {"rollout", "rollout_options"} <= names and obj.rollout_options:
        _check_stage_options(obj.rollout, obj.rollout_options)


def _check_estimator_options(advantage, options: tuple) -> None:
    from rlvr_lab import advantages  # here: advantages is not needed to import this module

    advantages.check_options(advantage, dict(options))
    try:
        hash(advantage), hash(options)
    except TypeError:
        _dry_run_estimator(advantage, options)
    else:
        _dry_run_estimator_cached(advantage, options)


def _dry_run_estimator(advantage, options: tuple) -> None:
    from rlvr_lab import advantages

    try:
        advantages.compute(advantage, np.array([[0.0, 1.0]], np.float32), **dict(options))
    except ValueError as err:
        raise ValueError(f"advantage_options: {err}") from None


_dry_run_estimator_cached = functools.lru_cache(maxsize=256)(_dry_run_estimator)


def stage_options(stage: str | RolloutStage | Callable[..., Any]) -> tuple[str, ...] | None:
    """Option names a rollout stage (a registered name or a ``RolloutStage``) declares; None
    when it cannot be inspected (then any option passes)."""
    if isinstance(stage, str):
        stage = _registry.category("stage").get(stage)
    out: list[str] = []
    for attr, skip in (("init", 2), ("sample", 4)):
        fn = getattr(stage, attr, None)
        if fn is None:
            return None
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return None
        out += [p.name for p in params[skip:]
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in out]
    return tuple(out)


def _check_stage_options(stage, options: tuple) -> None:
    allowed = stage_options(stage)
    if allowed is None:
        return
    for name, _ in options:
        if name not in allowed:
            label = stage if isinstance(stage, str) else type(stage).__name__
            raise ValueError(f"unknown rollout option {name!r} for stage {label!r}; valid: "
                             f"{', '.join(allowed) or 'none (it takes no options)'}")


# ----------------------------------------------------------------------------- decorator
def rl_config(cls: type[_T]) -> type[_T]:
    """Frozen dataclass with per-field checks, alias translation and ``replace``.

    The class's own ``__post_init__`` (cross-field checks) runs after the field checks.
    ``config.replace(**changes)`` accepts aliases too.
    """
    cross = cls.__dict__.get("__post_init__")

    def __post_init__(self):
        validate(self)
        if cross is not None:
            cross(self)

    cls.__post_init__ = __post_init__
    cls = dataclasses.dataclass(frozen=True)(cls)
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **translate(type(self), kwargs))

    def replace(self, **changes):
        changes = translate(type(self), changes)
        return dataclasses.replace(self, **changes)

    cls.__init__ = __init__
    cls.replace = replace
    return cls


def describe(value: Any) -> str:
    """A stable text for a config value (a callable by its qualified name), for hashes."""
    if callable(value) and not isinstance(value, type):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
    return repr(value)
