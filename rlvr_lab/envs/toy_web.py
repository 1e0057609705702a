"""A toy web: procedurally generated sites with verifiable tasks, as a jittable environment.

The interface follows gymnax: explicit pytrees ``EnvParams`` (one site and its task list)
and ``EnvState`` (one episode), ``reset(key, params)`` and ``step(key, state, action,
params)``; everything is pure, so ``jax.vmap`` runs many sites or episodes in parallel.

**Site.** ``num_pages`` pages (index 0 is the home page) form a tree: page ``p >= 1`` is a
child of a page ``parent[p] < p``, drawn uniformly among the pages that still have a free link
slot; each page has ``num_links`` link slots and ``links[q, i]`` is the child reached by slot
``i`` of page ``q`` (``-1`` for an empty slot; slots are drawn uniformly among the free ones).
Every page except home has a type: exactly one FORM page (a text field taking one of
``num_values`` values), exactly one PURCHASE page (a "buy now" button), the others NAV.
Every page except home is flaky with probability ``flaky_frac`` (drawn once per site).

**Observation.** One integer. A live observation is ``page * (V + 1) + field`` with
``V = num_values`` and ``field`` 0 (empty) or ``v + 1`` (value ``v`` typed; only ever non-zero on
the FORM page). Two kinds of terminal observation follow: ``CONFIRM(v) = P * (V + 1) + v`` (the
form was submitted with value ``v``) and ``PURCHASED = P * (V + 1) + V``. So there are
``P * (V + 1) + V + 1`` observations; :func:`features` renders one as (page, page type, field,
visible links) for reading.

**Actions.** ``L + V + 2`` of them, ``L = num_links``: ``click(i) = i``, ``type(v) = L + v``,
``submit = L + V``, ``back = L + V + 1``. Transition rules, applied to the current page
``q`` and field ``f``:

* ``click(i)``: if ``links[q, i] == -1`` nothing changes. Otherwise the child page loads,
  except that a flaky child fails to load with probability ``load_fail_prob`` (then nothing
  changes). Arriving at any page empties the field.
* ``back``: moves to ``parent[q]`` (home stays home); served from cache, it never fails.
  The field is emptied.
* ``type(v)``: on the FORM page sets ``field = v + 1`` (overwriting); elsewhere nothing changes.
* ``submit``: on the FORM page with ``field = v + 1`` leads to the terminal ``CONFIRM(v)``; on
  the FORM page with an empty field nothing changes; on the PURCHASE page it buys, leading to
  the terminal ``PURCHASED`` (irreversible: the episode ends in failure whatever the task);
  on a NAV page (or home) nothing changes.

Every action counts as one step (one real interaction), including those that change nothing.

**Tasks and the success check.** A site carries ``num_reach_tasks + num_form_tasks`` tasks:
task ``k < num_reach_tasks`` is "reach page ``task_page[k]``" (distinct NAV pages, never home),
the others are "submit the form with value ``task_value[k]``" (distinct values). The
verifiable check :func:`is_success` of an observation: a reach task succeeds as soon as the
observation after a step shows the target page (field empty; a failed load is not an
arrival); a form task succeeds on ``CONFIRM(task_value)``, i.e. submitting the form with that
value. The reward is 1 on the step that succeeds and 0
otherwise (sparse, terminal).

**Episode end.** An episode starts on home with an empty field and ends (``done``) on
success, on a terminal observation (a wrong ``CONFIRM(v)`` or ``PURCHASED``: failure), or
after ``max_steps`` steps (failure). Stepping a finished episode changes nothing, gives reward
0 and does not count as an interaction (``info["interaction"]`` is False); there is no
auto-reset.

:func:`transition_tensor` gives the exact law ``T[o, a, o']`` of the next observation (terminal
observations are absorbing), so world-model errors and success probabilities are computed
exactly rather than sampled.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct
from jax.typing import ArrayLike

from rlvr_lab._registry import positive_int
from rlvr_lab.utils import check_number

NAV, FORM, PURCHASE = 0, 1, 2
REACH_TASK, FORM_TASK = 0, 1


class _Layout:
    """Action and observation counts from ``num_pages``, ``num_links`` and ``num_values``
    (shared by :class:`SiteConfig` and :class:`EnvParams`)."""

    @property
    def num_actions(self) -> int:
        return self.num_links + self.num_values + 2

    @property
    def num_obs(self) -> int:
        return self.num_pages * (self.num_values + 1) + self.num_values + 1


@dataclass(frozen=True)
class SiteConfig(_Layout):
    """Sizes and knobs of a generated site (static: they fix array shapes)."""

    num_pages: int = 10
    num_links: int = 3
    num_values: int = 3
    num_reach_tasks: int = 2
    num_form_tasks: int = 2
    flaky_frac: float = 0.3
    load_fail_prob: float = 0.3
    max_steps: int = 10

    def __post_init__(self):
        for name in ("num_pages", "num_links", "num_values", "max_steps"):
            positive_int(name, getattr(self, name))
        if self.num_pages < 4:
            raise ValueError(f"num_pages={self.num_pages} must be >= 4 (home, a form, a "
                             "purchase page and a reach target)")
        if not 3 <= self.max_steps <= 15:
            raise ValueError(f"max_steps={self.max_steps} is not allowed; horizons are 3..15")
        for name in ("num_reach_tasks", "num_form_tasks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be an integer >= 0")
        if self.num_reach_tasks > self.num_pages - 3:
            raise ValueError(f"num_reach_tasks={self.num_reach_tasks} must be <= num_pages - 3 "
                             f"= {self.num_pages - 3} (distinct NAV targets)")
        if self.num_form_tasks > self.num_values:
            raise ValueError(f"num_form_tasks={self.num_form_tasks} must be <= num_values = "
                             f"{self.num_values} (distinct values)")
        if self.num_reach_tasks + self.num_form_tasks < 1:
            raise ValueError("num_reach_tasks + num_form_tasks must be >= 1")
        for name in ("flaky_frac", "load_fail_prob"):
            check_number(getattr(self, name), name, "in [0, 1]", lambda v: (v >= 0) & (v <= 1))

    @property
    def num_tasks(self) -> int:
        return self.num_reach_tasks + self.num_form_tasks


@struct.dataclass
class EnvParams(_Layout):
    """One site and its tasks. Sizes are read from the array shapes."""

    links: jnp.ndarray        # [P, L] int32: child page of each link slot, -1 if empty
    parent: jnp.ndarray       # [P] int32: parent page (home's parent is home)
    page_type: jnp.ndarray    # [P] int32: NAV / FORM / PURCHASE
    flaky: jnp.ndarray        # [P] bool: the page may fail to load
    task_kind: jnp.ndarray    # [K] int32: REACH_TASK / FORM_TASK
    task_page: jnp.ndarray    # [K] int32: target page (reach) or the form page (form)
    task_value: jnp.ndarray   # [K] int32: the value to submit (form), -1 (reach)
    load_fail_prob: float | jnp.ndarray = 0.3
    max_steps: int | jnp.ndarray = 10
    num_values: int = struct.field(pytree_node=False, default=3)  # static: fixes obs layout

    @property
    def num_pages(self) -> int:
        return self.links.shape[-2]

    @property
    def num_links(self) -> int:
        return self.links.shape[-1]

    @property
    def num_tasks(self) -> int:
        return self.task_kind.shape[-1]


@struct.dataclass
class EnvState:
    page: jnp.ndarray      # int32
    field: jnp.ndarray     # int32: 0 empty, v + 1 typed
    task: jnp.ndarray      # int32
    t: jnp.ndarray         # int32: steps taken
    obs: jnp.ndarray       # int32: current observation (terminal ones included)
    done: jnp.ndarray      # bool
    success: jnp.ndarray   # bool


# ----------------------------------------------------------------------------- site generation
def uniform_choice(u: ArrayLike, allowed: jax.Array) -> jax.Array:
    """The index among the ``allowed`` ones (a bool vector with at least one True) that a
    uniform number ``u`` in [0, 1) picks, all allowed indices being equally likely."""
    rank = jnp.floor(u * allowed.sum()).astype(jnp.int32)          # which allowed index
    return jnp.argmax(allowed & (jnp.cumsum(allowed) == rank + 1))


def generate_site(key: jax.Array, config: SiteConfig) -> EnvParams:
    """Draw one site (tree, page types, flaky pages, tasks) as described in the module doc."""
    P, L, V = config.num_pages, config.num_links, config.num_values
    # one uniform draw feeds every choice (random calls are the slow part of compiling)
    u = jax.random.uniform(key, (4 * P + V,))
    u_tree, u_order = u[:2 * P].reshape(P, 2), u[2 * P:3 * P - 1]
    u_flaky, u_values = u[3 * P:4 * P], u[4 * P:]

    def attach(carry, inputs):
        links, n_children = carry
        p, (u_parent, u_slot) = inputs
        open_page = (jnp.arange(P) < p) & (n_children < L)
        parent = uniform_choice(u_parent, open_page)
        slot = uniform_choice(u_slot, links[parent] < 0)
        return (links.at[parent, slot].set(p), n_children.at[parent].add(1)), parent

    pages = jnp.arange(1, P)
    (links, _), parents = jax.lax.scan(
        attach, (jnp.full((P, L), -1, jnp.int32), jnp.zeros(P, jnp.int32)), (pages, u_tree[1:]))
    parent = jnp.concatenate([jnp.zeros(1, jnp.int32), parents.astype(jnp.int32)])

    # pages 1..P-1 in random order: the first is the FORM page, the second the PURCHASE page,
    # the next num_reach_tasks are the reach targets
    order = 1 + jnp.argsort(u_order)
    page_type = jnp.zeros(P, jnp.int32).at[order[0]].set(FORM).at[order[1]].set(PURCHASE)
    flaky = (u_flaky < config.flaky_frac).at[0].set(False)
    values = jnp.argsort(u_values)[:config.num_form_tasks]
    R, F = config.num_reach_tasks, config.num_form_tasks
    task_kind = jnp.concatenate([jnp.full(R, REACH_TASK), jnp.full(F, FORM_TASK)]).astype(jnp.int32)
    task_page = jnp.concatenate([order[2:2 + R], jnp.full(F, order[0])]).astype(jnp.int32)
    task_value = jnp.concatenate([jnp.full(R, -1), values]).astype(jnp.int32)
    return EnvParams(links=links.astype(jnp.int32), parent=parent, page_type=page_type,
                     flaky=flaky, task_kind=task_kind, task_page=task_page,
                     task_value=task_value, load_fail_prob=config.load_fail_prob,
                     max_steps=config.max_steps, num_values=V)


# ----------------------------------------------------------------------------- observations
def live_obs(page: int | jax.Array, field: int | jax.Array,
             params: EnvParams) -> int | jax.Array:
    return page * (params.num_values + 1) + field


def confirm_obs(value: int | jax.Array, params: EnvParams) -> int | jax.Array:
    return params.num_pages * (params.num_values + 1) + value


def purchased_obs(params: EnvParams) -> int:
    return params.num_pages * (params.num_values + 1) + params.num_values


def home_obs(params: EnvParams) -> int:
    return live_obs(0, 0, params)


def terminal_obs_mask(params: EnvParams) -> jax.Array:
    """[O] bool: the CONFIRM(v) and PURCHASED observations."""
    return jnp.arange(params.num_obs) >= params.num_pages * (params.num_values + 1)


def reachable_obs_mask(params: EnvParams) -> jax.Array:
    """[O] bool: observations some action sequence can show (typed fields only on the form,
    and the terminal ones)."""
    o = jnp.arange(params.num_obs)
    page, field = o // (params.num_values + 1), o % (params.num_values + 1)
    live = o < params.num_pages * (params.num_values + 1)
    on_form = params.page_type[jnp.minimum(page, params.num_pages - 1)] == FORM
    return jnp.where(live, (field == 0) | on_form, True)


def is_success(obs: ArrayLike, task: ArrayLike, params: EnvParams) -> jax.Array:
    """The verifiable success check of an observation for a task (module doc)."""
    reach = obs == live_obs(params.task_page[task], 0, params)
    form = obs == confirm_obs(params.task_value[task], params)
    return jnp.where(params.task_kind[task] == REACH_TASK, reach, form)


def success_obs_mask(params: EnvParams) -> jax.Array:
    """[K, O] bool: which observations succeed for each task."""
    return jax.vmap(lambda k: is_success(jnp.arange(params.num_obs), k, params))(
        jnp.arange(params.num_tasks))


def features(obs: ArrayLike, params: EnvParams) -> jax.Array:
    """A readable rendering ``[page, page type, field, link_0 .. link_{L-1}]`` of a live
    observation; terminal ones render as ``[-1, -1, v (or V for PURCHASED), -1 ...]``."""
    V = params.num_values
    live = obs < params.num_pages * (V + 1)
    page = jnp.minimum(obs // (V + 1), params.num_pages - 1)
    row = jnp.concatenate([jnp.stack([page, params.page_type[page], obs % (V + 1)]),
                           params.links[page]])
    dead = jnp.full_like(row, -1).at[2].set(obs - params.num_pages * (V + 1))
    return jnp.where(live, row, dead)


# ----------------------------------------------------------------------------- dynamics
def _outcome(page, field, action, params: EnvParams):
    """The deterministic part of a step: (observation if the load succeeds, whether the step
    loads a flaky page, i.e. may fail and leave the observation unchanged)."""
    L, V = params.num_links, params.num_values
    here = live_obs(page, field, params)
    kind = params.page_type[page]
    is_click = action < L
    child = params.links[page, jnp.clip(action, 0, L - 1)]
    has_link = is_click & (child >= 0)
    is_type = (action >= L) & (action < L + V)
    is_submit = action == L + V
    is_back = action == L + V + 1
    nxt = here
    nxt = jnp.where(has_link, live_obs(jnp.maximum(child, 0), 0, params), nxt)
    nxt = jnp.where(is_back, live_obs(params.parent[page], 0, params), nxt)
    nxt = jnp.where(is_type & (kind == FORM), live_obs(page, action - L + 1, params), nxt)
    nxt = jnp.where(is_submit & (kind == FORM) & (field > 0), confirm_obs(field - 1, params), nxt)
    nxt = jnp.where(is_submit & (kind == PURCHASE), purchased_obs(params), nxt)
    may_fail = has_link & params.flaky[jnp.maximum(child, 0)]
    return nxt.astype(jnp.int32), may_fail


def _decode(obs, params: EnvParams):
    V = params.num_values
    return jnp.minimum(obs // (V + 1), params.num_pages - 1), obs % (V + 1)


def transition_tensor(params: EnvParams) -> jax.Array:
    """[O, A, O] exact law of the next observation; terminal observations are absorbing."""
    n_obs, n_act = params.num_obs, params.num_actions
    obs = jnp.arange(n_obs)
    page, field = _decode(obs, params)
    nxt, may_fail = jax.vmap(lambda p, f: jax.vmap(lambda a: _outcome(p, f, a, params))(
        jnp.arange(n_act)))(page, field)
    nxt = jnp.where(terminal_obs_mask(params)[:, None], obs[:, None], nxt)
    may_fail = may_fail & ~terminal_obs_mask(params)[:, None]
    fail = jnp.where(may_fail, params.load_fail_prob, 0.0)
    loaded = jax.nn.one_hot(nxt, n_obs) * (1.0 - fail)[..., None]
    stay = jax.nn.one_hot(jnp.broadcast_to(obs[:, None], (n_obs, n_act)), n_obs) * fail[..., None]
    return loaded + stay


def reset_to_task(params: EnvParams, task: ArrayLike) -> tuple[jax.Array, EnvState]:
    """The start state of an episode of ``task``: home page, empty field."""
    z = jnp.zeros((), jnp.int32)
    obs = jnp.asarray(home_obs(params), jnp.int32)
    return obs, EnvState(page=z, field=z, task=jnp.asarray(task, jnp.int32), t=z, obs=obs,
                         done=jnp.zeros((), bool), success=jnp.zeros((), bool))


def reset(key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
    """Start an episode of a task drawn uniformly from the site's tasks."""
    return reset_to_task(params, jax.random.randint(key, (), 0, params.num_tasks))


def step(key: jax.Array, state: EnvState, action: ArrayLike, params: EnvParams
         ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, jax.Array]]:
    """One step: ``(obs, state, reward, done, info)`` with ``info = {"success",
    "interaction"}`` (rules in the module doc)."""
    nxt, may_fail = _outcome(state.page, state.field, action, params)
    failed = may_fail & (jax.random.uniform(key) < params.load_fail_prob)
    nxt = jnp.where(failed, state.obs, nxt)
    active = ~state.done
    obs = jnp.where(active, nxt, state.obs).astype(jnp.int32)
    success = active & is_success(obs, state.task, params)
    t = state.t + active.astype(jnp.int32)
    done = state.done | success | terminal_obs_mask(params)[obs] | (t >= params.max_steps)
    page, field = _decode(obs, params)
    live = ~terminal_obs_mask(params)[obs]
    new = EnvState(page=jnp.where(live, page, state.page), field=jnp.where(live, field, 0),
                   task=state.task, t=t, obs=obs, done=done, success=state.success | success)
    return obs, new, success.astype(jnp.float32), done, {"success": success,
                                                          "interaction": active}


# ----------------------------------------------------------------------------- expert
def page_depth(params: EnvParams) -> jax.Array:
    """[P] number of clicks from home to each page."""
    def up(depth, _):
        return jnp.where(jnp.arange(params.num_pages) == 0, 0, depth[params.parent] + 1), None
    depth, _ = jax.lax.scan(up, jnp.zeros(params.num_pages, jnp.int32), None,
                            length=params.num_pages)
    return depth


def expert_actions(params: EnvParams) -> jax.Array:
    """[K, O] int32: a shortest-path expert. For a reach task, or for a form task until it
    stands on the form page: the link towards the goal page if the goal lies below the
    current page, else ``back``. On the form page: ``type(goal value)`` unless already typed,
    then ``submit``. (Terminal observations get ``back``; it is never used there.)"""
    P, L, V = params.num_pages, params.num_links, params.num_values

    def ancestors_of(goal):  # [P] bool: pages on the path home -> goal, goal included
        def up(carry, _):
            on_path, node = carry
            return (on_path.at[node].set(True), params.parent[node]), None
        (on_path, _), _ = jax.lax.scan(up, (jnp.zeros(P, bool), goal), None, length=P)
        return on_path

    def for_task(k):
        goal = params.task_page[k]
        on_path = ancestors_of(goal)
        child = params.links                                           # [P, L]
        towards = (child >= 0) & on_path[jnp.maximum(child, 0)]
        click = jnp.argmax(towards, axis=-1)
        page_action = jnp.where(towards.any(-1), click, L + V + 1)     # [P]
        obs = jnp.arange(params.num_obs)
        page, field = _decode(obs, params)
        act = page_action[page]
        at_form = (params.task_kind[k] == FORM_TASK) & (page == goal)
        want = params.task_value[k] + 1
        act = jnp.where(at_form, jnp.where(field == want, L + V, L + want - 1), act)
        return jnp.where(terminal_obs_mask(params), L + V + 1, act).astype(jnp.int32)

    return jax.vmap(for_task)(jnp.arange(params.num_tasks))
