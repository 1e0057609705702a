"""Experiment and claim registry, and the runner behind ``rlvr-lab run`` / ``reproduce``.

A paper reproduction declares its claims once and registers experiments with
:func:`experiment`; the experiment measures, and the claims engine (:mod:`rlvr_lab.claims`)
decides every claim from the per-seed numbers::

    CLAIMS = (claims.Declared("rl_raises_pass1", statement=..., rule="superiority",
                              threshold=0.0, estimand=..., unit=..., paper_ref=...), ...)

    @experiment("tiny_grpo", paper="GRPO", claims=CLAIMS, plan=FULL_PLAN, quick_plan=QUICK_PLAN)
    def run(ctx: Context) -> list[Claim]:
        ...                      # compute, ctx.save_figure(fig, "name"), ctx.save_table(df, "name")
        return ctx.decide({"rl_raises_pass1": claims.nested(gains, base_labels)})

(``ctx.sequential(measure)`` adds SFT bases while a claim is undecided; see
``docs/claims.md``.)
The runner writes each experiment's result JSON, tables and figures atomically (temporary file
+ rename) and, on a rerun, skips an experiment whose result exists for the same config hash
(experiment, quick flag, seeds, and the source of the library and of the experiment module)
and whose recorded sources are unchanged: every project module the run imported, even inside
a function, is recorded while it runs and stored with its SHA-256 (:func:`run_sources`), so
an edit of any of them recomputes it. An interrupted ``reproduce`` loses nothing that
finished.
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

import numpy as np
import pandas as pd

from rlvr_lab import claims as claims_engine
from rlvr_lab import discovery
from rlvr_lab import io as _io
from rlvr_lab import plotting
from rlvr_lab._registry import Registry, positive_int

if TYPE_CHECKING:
    import jax
    from matplotlib.figure import Figure

DECISION_COLUMNS = ("rule", "estimate", "ci_low", "ci_high", "threshold", "fail_threshold",
                    "direction", "level", "n_seeds", "n_bases", "unit", "estimand",
                    "interval_method", "control", "control_verdict", "stable")
CLAIM_COLUMNS = ("experiment", "paper", "setting", "claim", "statement", "paper_value",
                 "paper_ref", "measured", "measured_text", "criterion", "verdict",
                 "reason") + DECISION_COLUMNS
VERDICTS = ("pass", "fail", "inconclusive", claims_engine.NOT_APPLICABLE, "not evaluated")
SETTINGS = ("bank", "small model", "simulator", "theory", "toy")


@dataclass(frozen=True)
class Claim:
    """One paper claim tested in one run.

    ``verdict`` is ``pass`` / ``fail`` from the stated ``criterion`` applied to ``measured``;
    ``inconclusive`` when the run cannot decide (its positive control failed, or the test has
    too little power: the ``reason`` says what would decide it); ``not evaluated`` when the
    run did not compute it. ``measured`` is a number (NaN when there is none); text notes go
    to ``measured_text``. ``setting`` says where it was tested (``bank``, ``small model``,
    ``simulator``, ``theory``, ``toy``); ``paper_ref`` the paper's section/table/figure.
    """

    id: str
    paper: str
    statement: str
    paper_value: str
    measured: float
    criterion: str
    verdict: str
    reason: str = ""
    experiment: str = ""
    setting: str = ""
    paper_ref: str = ""
    measured_text: str = ""
    # the engine's columns (rlvr_lab.claims); empty for a claim not decided by the engine
    rule: str = ""
    estimate: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    threshold: float = math.nan
    fail_threshold: float = math.nan
    direction: str = ""
    level: float = math.nan
    n_seeds: int = 0
    n_bases: int = 0
    unit: str = ""
    estimand: str = ""
    interval_method: str = ""
    control: str = ""          # the positive controls gating this claim (claims.gate)
    control_verdict: str = ""  # their verdict: a pass/fail counts only when it is "pass"
    stable: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} is not allowed; choose one of "
                             f"{', '.join(map(repr, VERDICTS))}")

    def row(self) -> dict:
        measured = _rounded(self.measured)
        return {"experiment": self.experiment, "paper": self.paper, "setting": self.setting,
                "claim": self.id, "statement": self.statement,
                "paper_value": self.paper_value, "paper_ref": self.paper_ref,
                "measured": measured, "measured_text": self.measured_text,
                "criterion": self.criterion, "verdict": self.verdict, "reason": self.reason,
                **{name: _rounded(getattr(self, name)) for name in DECISION_COLUMNS}}

    @classmethod
    def from_decision(cls, decision: claims_engine.Decision) -> Claim:
        """The row of one engine decision: the verdict follows from its own columns."""
        s, fields = decision.spec, decision.row_fields()
        return cls(id=s.id, paper=s.paper, statement=s.statement, paper_value=s.paper_value,
                   measured=fields["estimate"], criterion=s.criterion,
                   verdict=decision.verdict, reason=decision.reason, setting=s.setting,
                   paper_ref=s.paper_ref, **fields)

    @classmethod
    def not_run(cls, spec: claims_engine.Declared, reason: str) -> Claim:
        """The row of a declared claim this run did not decide: its declaration, no numbers,
        verdict ``not evaluated``."""
        return cls(id=spec.id, paper=spec.paper, statement=spec.statement,
                   paper_value=spec.paper_value, measured=math.nan, criterion=spec.criterion,
                   verdict="not evaluated", reason=reason, setting=spec.setting,
                   paper_ref=spec.paper_ref, rule=spec.rule, threshold=spec.threshold,
                   fail_threshold=spec.fail_threshold, direction=spec.direction,
                   level=spec.level, unit=spec.unit, estimand=spec.estimand)

    @property
    def passed(self) -> bool | None:
        """True for ``pass``, False for ``fail``, None otherwise (inconclusive, not evaluated)."""
        return {"pass": True, "fail": False}.get(self.verdict)

    @property
    def status(self) -> str:
        return {"fail": "FAIL"}.get(self.verdict, self.verdict)


def _rounded(x):
    """Six significant digits for a finite float (the CSV's precision); other values as is."""
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.6g}")
    return x


def claim(id: str, statement: str, measured: Any, passed: object, criterion: str, *,
          paper: str = "", paper_value: str = "", reason: str = "", setting: str = "",
          paper_ref: str = "", verdict: str | None = None) -> Claim:
    """Build a :class:`Claim`.

    ``measured`` may be a number or text (text is kept in ``measured_text`` and ``measured``
    becomes NaN); ``passed`` a bool-like or None (not evaluated). ``verdict`` overrides the
    verdict derived from ``passed`` (e.g. ``"inconclusive"`` when a positive control failed).
    A non-finite measured number fails the claim (it cannot satisfy a criterion).
    Without a ``paper_ref``, the claim's recorded source in :mod:`rlvr_lab.bibliography` is
    used (e.g. ``"arXiv:2508.13755 abstract"``; empty when none is recorded).
    """
    if hasattr(measured, "item"):
        measured = measured.item()
    measured_text = ""
    if isinstance(measured, str):
        measured_text, measured = measured, float("nan")
    elif measured is None:
        measured = float("nan")
    else:
        measured = float(measured)
        if not math.isfinite(measured) and passed is not None and verdict is None:
            passed, reason = False, reason or "measured value is not finite"
    if verdict is None:
        verdict = "not evaluated" if passed is None else ("pass" if bool(passed) else "fail")
    if not paper_ref:
        from rlvr_lab import bibliography

        paper_ref = bibliography.paper_ref(id)
    return Claim(id=id, paper=paper, statement=statement, paper_value=paper_value,
                 measured=measured, criterion=criterion, verdict=verdict, reason=reason,
                 setting=setting, paper_ref=paper_ref, measured_text=measured_text)


def _claim_from_dict(c: dict) -> Claim:
    """A stored claim (older files had ``passed`` instead of ``verdict``)."""
    names = {f.name for f in dataclasses.fields(Claim)}
    data = {k: v for k, v in c.items() if k in names}
    if "verdict" not in data:
        passed = c.get("passed")
        data["verdict"] = "not evaluated" if passed is None else ("pass" if passed else "fail")
    if data.get("measured") is None or isinstance(data.get("measured"), str):
        text = data.get("measured")
        data["measured"] = float("nan")
        data.setdefault("measured_text", text or "")
    return Claim(**data)


@dataclass
class Context:
    """What an experiment gets: run mode, seed count, output folder, a PRNG seed."""

    name: str
    quick: bool
    seeds: int
    out_dir: Path
    seed: int = 0
    figures: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    declared: tuple[claims_engine.Declared, ...] = ()
    plan: claims_engine.SeedPlan | None = None
    # {path relative to out_dir: sha256} of every file written, checked before a reuse
    outputs: dict = field(default_factory=dict)

    def stream(self, name: str) -> jax.Array:
        """The named randomness stream ``name`` of this run (e.g. ``"rl"``, ``"heldout"``):
        a typed key folded from the run seed and a stable hash of the name
        (:mod:`rlvr_lab.random_streams`), so streams are independent and adding one never
        shifts another."""
        import jax

        from rlvr_lab import random_streams
        return random_streams.stream(jax.random.key(self.seed), name)

    def _specs(self) -> list[claims_engine.Declared]:
        """The declared claims this run decides (a quick run leaves out ``full_only`` ones)."""
        if not self.declared:
            raise RuntimeError(f"experiment {self.name!r} declares no claims as "
                               "rlvr_lab.claims.Declared objects")
        return [s for s in self.declared if not (self.quick and s.full_only)]

    def skipped(self) -> frozenset[str]:
        """Ids of the claims this run does not decide (``full_only`` claims in a quick run):
        their arms need not run."""
        return frozenset(s.id for s in self.declared if self.quick and s.full_only)

    def _in_declared_order(self, decided: list[Claim]) -> list[Claim]:
        """``decided`` with a ``not evaluated`` row for each skipped claim, in declared order."""
        skipped = self.skipped()
        rows = {c.id: c for c in decided}
        rows |= {s.id: Claim.not_run(s, f"quick mode skips it ({s.full_only}); the full "
                                        "reproduction decides it")
                 for s in self.declared if s.id in skipped}
        return [rows[s.id] for s in self.declared]

    def decide(self, samples, *, seeds_per_base: int = 1) -> list[Claim]:
        """Decide every declared claim of this experiment from ``{claim id: sample}`` (one
        look; see :func:`rlvr_lab.claims.decide_all`); samples of skipped claims are ignored."""
        skipped = self.skipped()
        samples = {k: v for k, v in samples.items() if k not in skipped}
        return self._in_declared_order([Claim.from_decision(d) for d in claims_engine.decide_all(
            self._specs(), samples, seeds_per_base=seeds_per_base)])

    def sequential(self, measure) -> tuple[list[Claim], claims_engine.SequentialResult]:
        """Decide every declared claim with seeds nested in SFT bases, adding batches of bases
        while a claim is undecided (:func:`rlvr_lab.claims.decide_sequentially` with this
        run's :attr:`plan`). ``measure(bases, open_ids) -> {claim id: sample}``; skipped
        claims are never among ``open_ids``."""
        if self.plan is None:
            raise RuntimeError(f"experiment {self.name!r} has no SeedPlan; pass plan= and "
                               "quick_plan= to @experiment")
        result = claims_engine.decide_sequentially(self._specs(), measure, self.plan)
        return self._in_declared_order([Claim.from_decision(d) for d in result.decisions]), \
            result

    def progress(self, iterable: Iterable, desc: str,
                 total: int | None = None) -> Iterable[Any]:
        """``iterable`` with a progress bar on stderr named ``<experiment>: <desc>`` (one per
        stage or arm), so a long ``rlvr-lab run`` is never silent."""
        from tqdm.auto import tqdm

        return tqdm(iterable, desc=f"{self.name}: {desc}", total=total, leave=False,
                    file=sys.stderr, disable=None)

    def _written(self, path: Path, data: bytes | None = None) -> None:
        if data is None:
            data = Path(path).read_bytes()
        self.outputs[Path(path).relative_to(self.out_dir).as_posix()] = \
            hashlib.sha256(data).hexdigest()

    def save_figure(self, fig: Figure, name: str) -> list[Path]:
        paths = plotting.save_figure(fig, name, out_dir=self.out_dir)
        for p in paths:
            self._written(p)
        self.figures.append(name)
        return paths

    def save_table(self, df: pd.DataFrame, name: str) -> Path:
        """Write ``data/<name>.csv.gz`` (six significant digits; ``pd.read_csv`` reads it)."""
        path = self.out_dir / "data" / f"{name}.csv.gz"
        data = gzip.compress(df.to_csv(index=False, float_format="%.6g").encode(), mtime=0)
        atomic_write_bytes(path, data)
        self._written(path, data)
        self.tables.append(name)
        return path


@dataclass(frozen=True)
class Experiment:
    name: str
    paper: str
    claims: tuple[str, ...]
    fn: Callable[[Context], list[Claim]]
    description: str = ""
    default_seeds: int = 16
    quick_seeds: int = 4
    setting: str = ""  # fills the claims' empty ``setting``
    sft_bases: tuple[str, ...] = ()  # names in ``sft.PRESETS`` of the SFT bases it trains from
    declared: tuple[claims_engine.Declared, ...] = ()  # the claims, when declared objects
    plan: claims_engine.SeedPlan | None = None        # full runs: seeds nested in SFT bases
    quick_plan: claims_engine.SeedPlan | None = None  # quick runs

    def plan_for(self, quick: bool, seeds: int | None = None) -> claims_engine.SeedPlan | None:
        """The run's seed plan; an explicit ``seeds`` sets the seeds per base."""
        plan = self.quick_plan if quick else self.plan
        if plan is not None and seeds is not None:
            plan = dataclasses.replace(plan, seeds_per_base=seeds)
        return plan

    @property
    def module_file(self) -> str:
        return inspect.getsourcefile(self.fn) or ""


@dataclass
class Result:
    experiment: str
    paper: str
    claims: list[Claim]
    figures: list[str]
    tables: list[str]
    seconds: float
    config_hash: str
    skipped: bool = False
    error: str = ""
    # {source file: sha256} of the modules the run executed (recorded while it ran)
    sources: dict[str, str] = field(default_factory=dict)
    # {output file relative to the out folder: sha256}; None in a file written before outputs
    # were recorded (then it cannot be checked and is not reused)
    outputs: dict[str, str] | None = None

    def claims_frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.row() for c in self.claims], columns=list(CLAIM_COLUMNS))


_EXPERIMENTS: Registry = Registry("experiment")
_F = TypeVar("_F", bound="Callable[[Context], list[Claim]]")


def experiment(name: str, *, paper: str, claims: Iterable[str | claims_engine.Declared],
               default_seeds: int = 16, quick_seeds: int = 4, description: str = "",
               setting: str = "", sft_bases: Iterable[str] = (),
               plan: claims_engine.SeedPlan | None = None,
               quick_plan: claims_engine.SeedPlan | None = None) -> Callable[[_F], _F]:
    """Decorator registering ``fn(ctx) -> list[Claim]`` as an experiment.

    ``claims``: the :class:`rlvr_lab.claims.Declared` claims (their ids are the experiment's
    claim ids; ``ctx.decide`` / ``ctx.sequential`` decide them), or bare ids for an experiment
    that builds its rows itself. ``plan`` / ``quick_plan``: seeds nested in SFT bases for full
    and quick runs (``ctx.plan``); given together or not at all.

    ``setting`` (one of ``SETTINGS``) is where its claims are tested; it fills each returned
    claim's empty ``setting`` (a claim may still set its own). ``sft_bases``: the
    ``sft.PRESETS`` names of the SFT bases it loads (``reproduce`` trains missing ones first,
    in parallel, instead of letting its workers queue on one base's lock).
    """
    if setting and setting not in SETTINGS:
        raise ValueError(f"experiment {name!r}: setting={setting!r} is not allowed; choose one "
                         f"of {', '.join(map(repr, SETTINGS))}")
    sft_bases = tuple(sft_bases)
    if sft_bases:
        from rlvr_lab.train import sft
        unknown = [b for b in sft_bases if b not in sft.PRESETS]
        if unknown:
            raise ValueError(f"experiment {name!r}: sft_bases={unknown!r} are not allowed; "
                             f"choose from {', '.join(map(repr, sft.PRESETS))}")

    claims = tuple(claims)
    declared = tuple(c for c in claims if isinstance(c, claims_engine.Declared))
    if declared and len(declared) != len(claims):
        raise ValueError(f"experiment {name!r}: claims mixes Declared objects and bare ids")
    ids = tuple(c.id if isinstance(c, claims_engine.Declared) else c for c in claims)
    if len(set(ids)) != len(ids):
        raise ValueError(f"experiment {name!r}: a claim id is declared twice in {ids}")
    declared = tuple(dataclasses.replace(
        d, paper=d.paper or paper, setting=d.setting or setting,
        paper_ref=d.paper_ref or _bib_ref(d.id)) for d in declared)
    if (plan is None) != (quick_plan is None):
        raise ValueError(f"experiment {name!r}: give plan= and quick_plan= together")

    def deco(fn):
        doc = description or (inspect.getdoc(fn) or "").split("\n\n")[0]
        _EXPERIMENTS.register(name, Experiment(
            name=name, paper=paper, claims=ids, fn=fn, description=doc,
            default_seeds=default_seeds, quick_seeds=quick_seeds, setting=setting,
            sft_bases=sft_bases, declared=declared, plan=plan, quick_plan=quick_plan))
        return fn

    return deco


_LOADED = False
LOAD_ERRORS: dict[str, str] = {}


# the experiment modules: a top-level package installed (or checked out) next to rlvr_lab
SIMULATIONS_DIR = Path(__file__).resolve().parents[1] / "simulations"


def _simulations_package():
    """The ``simulations`` package next to ``rlvr_lab``, imported by its path
    (:func:`rlvr_lab.discovery.load` with ``path``).

    ``simulations`` is a common name: a plain ``import`` would pick up any folder of that name
    in the working directory first. Importing by path under the same name keeps the modules'
    own ``from simulations import ...`` working. Raises ImportError (one line, with the reason)
    when the folder is missing or a different ``simulations`` is already imported.
    """
    discovery.load("simulations", (), path=SIMULATIONS_DIR)
    return sys.modules["simulations"]


def load_all() -> None:
    """Import every module of the ``simulations`` folder next to ``rlvr_lab`` so their
    experiments register (called on first use, never when ``rlvr_lab`` is imported).

    A module that fails to import is recorded in ``LOAD_ERRORS`` (and reported by the CLI)
    instead of hiding every other paper's experiments; so is a missing or shadowed package
    (under ``"__init__"``).
    """
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    discovery.load("simulations", path=SIMULATIONS_DIR, errors=LOAD_ERRORS)


def registry() -> dict[str, Experiment]:
    load_all()
    return {n: _EXPERIMENTS.get(n) for n in _EXPERIMENTS.names()}


def get(name: str) -> Experiment:
    load_all()
    return _EXPERIMENTS.get(name)


def names() -> list[str]:
    load_all()
    return _EXPERIMENTS.names()


def papers() -> list[str]:
    return sorted({e.paper for e in registry().values()})


# ----------------------------------------------------------------------------- files
atomic_write_text = _io.atomic_write_text
atomic_write_bytes = _io.atomic_write_bytes


def _local_module_file(name: str) -> Path | None:
    """The source file of an ``rlvr_lab``/``simulations`` module (package -> __init__.py),
    resolved."""
    parts = name.split(".")
    if parts[0] not in ("rlvr_lab", "simulations"):
        return None
    found = _MODULE_FILES.get(name)
    if found is None:
        base = Path(__file__).resolve().parents[1].joinpath(*parts)
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.exists():
                # only hits are remembered: a module created later is still found
                found = _MODULE_FILES[name] = candidate.resolve()
                break
    return found


_MODULE_FILES: dict[str, Path] = {}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """``(module name, is the module part of a from-import)`` for each module-level import in
    ``path`` (imports inside functions are lazy plumbing, e.g. the runner's own discovery)."""
    st = path.stat()
    return list(_parsed_imports(path, st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=1024)
def _parsed_imports(path: Path, mtime_ns: int, size: int) -> tuple[tuple[str, bool], ...]:
    """:func:`_imports` of one version of a file (keyed by its modification time and size:
    a process running many experiments parses each file once, an edited file again)."""
    import ast

    found = []
    top = ast.parse(path.read_text()).body
    nodes = [n for stmt in top if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef,
                                                         ast.AsyncFunctionDef))
             for n in ast.walk(stmt)]
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend((a.name, False) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, True))
            found.extend((f"{node.module}.{a.name}", False) for a in node.names)
    return tuple(found)


def source_files(module_file: str | Path) -> list[Path]:
    """The experiment module and the project modules it imports, transitively.

    A package imported as a module (``from rlvr_lab import theory``) counts with all its
    submodules, since they may be loaded lazily by name; a package that only hosts the
    imported name, and the parents' ``__init__`` files, count by their own text.
    """
    seen: dict[Path, bool] = {}
    todo = [(Path(module_file).resolve(), True)]
    rollout_file = _local_module_file("rlvr_lab.train.rollout")
    registering_added = False
    while todo:
        if rollout_file in seen and not registering_added:
            # stages are registered by name by the paper packages rlvr_lab imports
            from rlvr_lab.papers import REGISTERING
            todo.extend((f, True) for f in map(_local_module_file, REGISTERING)
                        if f is not None and f not in seen)
            registering_added = True
        path, follow = todo.pop()
        if not path.exists() or (path in seen and (seen[path] or not follow)):
            continue
        seen[path] = follow
        if not follow:
            continue
        for name, from_module in _imports(path):
            target = name
            while target and _local_module_file(target) is None:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if not target:
                continue
            found = _local_module_file(target)
            is_package = found.name == "__init__.py"
            exact = target == name
            if is_package and exact and not from_module:
                todo.extend((f.resolve(), True) for f in found.parent.glob("*.py"))
            todo.append((found, not (is_package and (from_module or not exact))))
            parts = target.split(".")
            for i in range(1, len(parts)):
                parent = _local_module_file(".".join(parts[:i]))
                if parent is not None:
                    todo.append((parent, False))
    return sorted(seen)


def _source_digest(exp: Experiment) -> str:
    """Digest of the experiment's module, what it imports, and every library source file.

    Import tracing misses modules imported inside functions or by name, so every file of
    ``rlvr_lab`` counts too: an edit anywhere in the library reruns experiments (conservative,
    never stale)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    library = sorted(Path(__file__).resolve().parent.rglob("*.py"))
    for f in sorted(set(source_files(exp.module_file)) | set(library)):
        h.update(str(f.relative_to(root) if f.is_relative_to(root) else f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- run-time record
# The modules an experiment imports while it runs -- including a module imported inside a
# function, and one already loaded by an earlier experiment -- are recorded by wrapping
# ``builtins.__import__`` and ``importlib.import_module`` for the duration of the run (and by
# the new entries of ``sys.modules``). Their source files, with the modules they import at
# module level, are stored with the result as ``{file: sha256}``; a stored result is reused
# only while every one of those files is unchanged (:func:`_sources_unchanged`).
_RECORDERS: list[set[str]] = []
_RECORD_LOCK = threading.Lock()
_SAVED_IMPORTS: dict[str, Any] = {}


def _note(name: str) -> None:
    for found in list(_RECORDERS):
        found.add(name)


def _recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = _SAVED_IMPORTS["__import__"](name, globals, locals, fromlist, level)
    try:
        full = name
        if level:
            package = (globals or {}).get("__package__") or (globals or {}).get("__name__", "")
            full = importlib.util.resolve_name("." * level + name, package)
        _note(full)
        for item in fromlist or ():
            if isinstance(item, str) and item != "*":
                _note(f"{full}.{item}" if full else item)
    except Exception:  # noqa: BLE001 - recording must never break an import
        pass
    return module


def _recording_import_module(name, package=None):
    module = _SAVED_IMPORTS["import_module"](name, package)
    _note(module.__name__)
    return module


class _record_imports:
    """``with _record_imports() as names:`` -> every module name imported meanwhile (by any
    thread), whether or not it was loaded already."""

    def __enter__(self) -> set[str]:
        import builtins

        self.names: set[str] = set()
        with _RECORD_LOCK:
            if not _RECORDERS:
                _SAVED_IMPORTS["__import__"] = builtins.__import__
                _SAVED_IMPORTS["import_module"] = importlib.import_module
                builtins.__import__ = _recording_import
                importlib.import_module = _recording_import_module
            _RECORDERS.append(self.names)
        return self.names

    def __exit__(self, *exc) -> None:
        import builtins

        with _RECORD_LOCK:
            del _RECORDERS[next(i for i, r in enumerate(_RECORDERS) if r is self.names)]
            if not _RECORDERS:
                builtins.__import__ = _SAVED_IMPORTS.pop("__import__")
                importlib.import_module = _SAVED_IMPORTS.pop("import_module")


def _source_roots(exp: Experiment) -> list[Path]:
    """Folders whose modules are the project's: ``rlvr_lab``, ``simulations`` and the folder
    of the experiment's own module."""
    roots = [Path(__file__).resolve().parent, SIMULATIONS_DIR]
    if exp.module_file:
        roots.append(Path(exp.module_file).resolve().parent)
    return roots


def _module_source(name: str, roots: list[Path]) -> Path | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if not file or not str(file).endswith(".py"):
        return None
    path = Path(file).resolve()
    return path if any(path.is_relative_to(r) for r in roots) else None


def _shown_path(f: Path) -> str:
    root = Path(__file__).resolve().parents[1]
    return str(f.relative_to(root)) if f.is_relative_to(root) else str(f)


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def run_sources(exp: Experiment, imported: Iterable[str]) -> dict[str, str]:
    """``{source file: sha256}`` of what a run executed: the experiment's module, every
    project module among ``imported`` (the names recorded while it ran), and, transitively,
    the project modules these import at module level."""
    roots = _source_roots(exp)
    files = {Path(exp.module_file).resolve()} if exp.module_file else set()
    files |= {f for f in (_module_source(n, roots) for n in set(imported)) if f is not None}
    expanded = set(files)
    covered: set[Path] = set()
    for f in sorted(files):
        if f not in covered:      # a file already reached is in an earlier closure
            closure = source_files(f)
            covered.update(closure)
            expanded.update(closure)
    return {_shown_path(f): _file_digest(f) or "" for f in sorted(expanded)}


def _sources_unchanged(sources: dict[str, str]) -> bool:
    root = Path(__file__).resolve().parents[1]
    for name, digest in sources.items():
        path = Path(name) if Path(name).is_absolute() else root / name
        if not digest or _file_digest(path) != digest:
            return False
    return True


def config_hash(exp: Experiment, *, quick: bool, seeds: int, seed: int = 0) -> str:
    payload = json.dumps({"name": exp.name, "quick": quick, "seeds": seeds, "seed": seed,
                          "source": _source_digest(exp)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def default_out_dir(quick: bool) -> Path:
    base = plotting.figures_dir()
    return base / "quick" if quick else base


def _result_path(out_dir: Path, name: str) -> Path:
    return Path(out_dir) / "results" / f"{name}.json"


def _read_result(path: Path) -> Result | None:
    """A stored result, or None (with a one-line warning) when the file is unreadable or
    malformed: the caller recomputes that experiment instead of failing on another's file."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        claims = [_claim_from_dict(c) for c in data["claims"]]
        return Result(experiment=data["experiment"], paper=data["paper"], claims=claims,
                      figures=list(data["figures"]), tables=list(data.get("tables", [])),
                      seconds=float(data["seconds"]), config_hash=data["config_hash"],
                      skipped=True, error=data.get("error", "") or "",
                      sources=dict(data.get("sources") or {}),
                      outputs=None if data.get("outputs") is None else dict(data["outputs"]))
    except Exception as err:  # noqa: BLE001 - any malformed content means "not usable"
        print(f"warning: ignoring unreadable results file {path} ({type(err).__name__}); "
              "that experiment will be recomputed", file=sys.stderr)
        return None


def _load_result(path: Path, chash: str, out_dir: Path) -> Result | None:
    result = _read_result(path)
    if result is None or result.config_hash != chash or result.error:
        return None
    # what the run executed (modules imported inside functions included) must be unchanged;
    # a result without that record (an older file) cannot be checked, so it is recomputed
    if not result.sources or not _sources_unchanged(result.sources):
        return None
    return result if _outputs_intact(result, Path(out_dir)) else None


def _outputs_intact(result: Result, out_dir: Path) -> bool:
    """Every figure (PNG and PDF) and table of ``result`` exists with the SHA-256 recorded
    when it was written: a file truncated, deleted or replaced since is not reused (the
    experiment is recomputed and writes it again)."""
    if result.outputs is None:
        return False
    expected = {f"{f}.{ext}" for f in result.figures for ext in ("png", "pdf")}
    expected |= {f"data/{t}.csv.gz" for t in result.tables}
    if not expected <= set(result.outputs):
        return False
    return all(_file_digest(out_dir / rel) == digest for rel, digest in result.outputs.items())


def _stored(exp: Experiment, *, quick: bool, seeds: int | None, out: Path, seed: int = 0,
            force: bool = False) -> tuple[int, str, Result | None]:
    """``(seeds, config hash, reusable stored result)`` of one run of ``exp`` into ``out``
    (``seeds`` None: the experiment's quick or full count); no result (and no read) with
    ``force``."""
    if seeds is None:
        seeds = exp.quick_seeds if quick else exp.default_seeds
    chash = config_hash(exp, quick=quick, seeds=seeds, seed=seed)
    cached = None if force else _load_result(_result_path(out, exp.name), chash, out)
    return seeds, chash, cached


MAX_SEEDS = 4096   # seeds are vmapped in memory (the command line's --seeds cap)


def _check_run_arguments(*, quick, seeds, out_dir, force, seed, catch) -> None:
    """One-line errors for :func:`run`'s arguments, before anything runs or is stored."""
    for flag, value in (("quick", quick), ("force", force), ("catch", catch)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{flag}={value!r} is not allowed; it must be True or False")
    if seeds is not None:
        positive_int("seeds", seeds)
        if seeds > MAX_SEEDS:
            raise ValueError(f"seeds={seeds!r} is not allowed; at most {MAX_SEEDS}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) \
            or not 0 <= seed < 2**31:
        raise ValueError(f"seed={seed!r} is not allowed; it must be an integer in 0..2**31-1")
    if out_dir is not None:
        if not isinstance(out_dir, (str, os.PathLike)) or not str(out_dir).strip():
            raise TypeError(f"out_dir={out_dir!r} is not allowed; give a folder path")
        path = Path(out_dir)
        try:
            blocked = path.exists() and not path.is_dir()
        except (OSError, ValueError) as err:
            raise ValueError(f"out_dir={str(out_dir)[:80]!r} is not usable: "
                             f"{getattr(err, 'strerror', None) or err}") from None
        if blocked:
            raise ValueError(f"out_dir={str(out_dir)[:80]!r} is not allowed; it is a file, "
                             "not a folder")


def run(name: str, *, quick: bool = False, seeds: int | None = None,
        out_dir: str | Path | None = None, force: bool = False, seed: int = 0,
        catch: bool = False) -> Result:
    """Run one experiment (or reuse its stored result for the same config hash).

    ``quick`` uses small settings; ``seeds`` defaults to the experiment's quick or full count.
    With ``catch=True`` an exception is recorded in ``Result.error`` instead of raised.
    """
    exp = get(name)
    _check_run_arguments(quick=quick, seeds=seeds, out_dir=out_dir, force=force, seed=seed,
                         catch=catch)
    out = Path(out_dir) if out_dir is not None else default_out_dir(quick)
    explicit_seeds = seeds
    seeds, chash, cached = _stored(exp, quick=quick, seeds=seeds, out=out, seed=seed,
                                   force=force)
    if cached is not None:
        return cached
    path = _result_path(out, name)
    ctx = Context(name=name, quick=quick, seeds=seeds, out_dir=out, seed=seed,
                  declared=exp.declared, plan=exp.plan_for(quick, explicit_seeds))
    start = time.perf_counter()
    error = ""
    before = set(sys.modules)
    with _record_imports() as imported:
        try:
            with plotting.house_style():
                claims = list(exp.fn(ctx))
        except Exception:
            if not catch:
                raise
            error = traceback.format_exc(limit=-3)
            claims = _failed_claims(exp, error.strip().splitlines()[-1])
    seconds = time.perf_counter() - start
    sources = run_sources(exp, imported | (set(sys.modules) - before))
    claims = [dataclasses.replace(c, experiment=name, paper=c.paper or exp.paper,
                                  setting=c.setting or exp.setting,
                                  paper_ref=c.paper_ref or _bib_ref(c.id))
              for c in claims]
    declared, got = set(exp.claims), {c.id for c in claims}
    if not error and declared != got:
        raise RuntimeError(f"experiment {name!r} declared claims {sorted(declared)} "
                           f"but returned {sorted(got)}")
    result = Result(experiment=name, paper=exp.paper, claims=claims, figures=ctx.figures,
                    tables=ctx.tables, seconds=seconds, config_hash=chash, error=error,
                    sources=sources, outputs=dict(ctx.outputs))
    # only runs into the tracked figures (``reproduce``) are the toolkit's measured times
    if not error and out.resolve() == default_out_dir(quick).resolve():
        record_time(name, quick=quick, seeds=seeds, seconds=seconds)
    atomic_write_text(path, json.dumps({
        "experiment": name, "paper": exp.paper, "config_hash": chash, "quick": quick,
        "seeds": seeds, "seconds": seconds, "figures": ctx.figures, "tables": ctx.tables,
        "error": error, "claims": [dataclasses.asdict(c) for c in claims],
        "sources": sources, "outputs": ctx.outputs}, indent=1))
    return result


TIMINGS_FILE = "timings.json"


def timings_path() -> Path:
    """``<figures>/timings.json``: the last measured wall time of every experiment, quick and
    full, kept with the committed figures so ``rlvr-lab list`` shows typical runtimes."""
    return plotting.figures_dir() / TIMINGS_FILE


def read_timings(path: str | Path | None = None) -> dict:
    """``{name: {"quick" | "full": {"seconds", "seeds", "date", "cpus"}}}``; ``{}`` when the
    file is missing or unreadable (timings are informative, never required)."""
    path = Path(path) if path is not None else timings_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_time(name: str, *, quick: bool, seeds: int, seconds: float,
                path: str | Path | None = None) -> None:
    """Store one computed run's wall time (a reused result is not a measurement). Skipped
    silently where the figures folder does not exist (an installed package outside a
    checkout)."""
    path = Path(path) if path is not None else timings_path()
    if not path.parent.is_dir():
        return
    with _io.file_lock(path.with_name(path.name + ".lock")):   # parallel reproduce workers
        data = read_timings(path)
        data.setdefault(name, {})["quick" if quick else "full"] = {
            "seconds": round(float(seconds), 1), "seeds": int(seeds),
            "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}
        atomic_write_text(path, json.dumps(dict(sorted(data.items())), indent=1) + "\n")


def format_seconds(seconds: float | None) -> str:
    """``"42 s"``, ``"3.5 min"``; ``"-"`` when unknown."""
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _bib_ref(claim_id: str) -> str:
    from rlvr_lab import bibliography

    return bibliography.paper_ref(claim_id)


# ----------------------------------------------------------------------------- claims table
def claims_frame(results: Iterable[Result]) -> pd.DataFrame:
    rows = [c.row() for r in results for c in r.claims]
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def claims_markdown(df: pd.DataFrame, *, quick: bool) -> str:
    """CLAIMS.md: how to read it, a legend of the source tags, then one section per paper with
    its verdict counts and one short block per claim (no wide table rows)."""
    lines = ["# Claims", "",
             f"Generated by `rlvr-lab reproduce{' --quick' if quick else ''}`; every measured "
             "value is computed in that run. All papers: " + verdict_counts(df) + ".", "",
             "**How to read.** Each claim is declared once beside its experiment (the "
             "paper's statement and value, the estimand measured per seed, a rule and its "
             "thresholds fixed before the run) and decided by one engine "
             "(`rlvr_lab.claims`): `pass` when the interval lies wholly on the pass side of "
             "`threshold`, `fail` when it lies wholly on the fail side of `fail_threshold`, "
             "`inconclusive` otherwise (the reason says about how many seeds would decide it); "
             "`not applicable here` for a mechanism this hardware cannot express (the "
             "measurement is kept); `not evaluated` when the run did not compute it. "
             "Small-model seeds are nested in several SFT bases and their intervals are over "
             "base means. A failing claim is a result, not a bug. Machine-readable: "
             "`claims.csv` (`rule, estimate, ci_low, ci_high, threshold, fail_threshold, "
             "direction, level, n_seeds, n_bases, unit, stable`).", "",
             "**Source tags** in the paper value: `[summary]` the paper's abstract or summary; "
             "`[authors' code]` read from the authors' code; `[ours, to verify]` our reading, "
             "not stated by the paper. References: `docs/papers.md`.", ""]
    from rlvr_lab import report

    for paper, part in df.groupby("paper", sort=True):
        lines += [f"## {paper}", "", verdict_counts(part) + ".", ""]
        why = report.why_not_pass(part)
        lines += [why, ""] if why else []
        for r in part.itertuples():
            verdict = "**FAIL**" if r.verdict == "fail" else r.verdict
            measured = r.measured_text if pd.isna(r.measured) else r.measured
            lines.append(f"- `{r.claim}` ({r.experiment}) — {verdict}: {_md_cell(r.statement)}")
            lines.append(f"  paper: {_md_cell(r.paper_value) or '—'} "
                         f"({_md_cell(r.paper_ref) or 'source not located'}); measured: "
                         f"{_interval_text(r) or _md_cell(measured)}; criterion: "
                         f"{_md_cell(r.criterion)}")
            if str(r.reason or "").strip():
                lines.append(f"  reason: {_md_cell(r.reason)}")
        lines.append("")
    return "\n".join(lines)


def _interval_text(r) -> str:
    """``+0.12 pass@1 [+0.05, +0.19] (95%, 12 seeds in 6 bases)`` for a row decided by the
    engine; empty for one that was not."""
    rule = getattr(r, "rule", "")
    if not isinstance(rule, str) or not rule or pd.isna(r.estimate):
        return ""
    unit = f" {r.unit}" if isinstance(r.unit, str) and r.unit else ""
    if rule == "exact":
        return f"largest error {r.estimate:.3g}{unit}"
    bases = f" in {int(r.n_bases)} bases" if r.n_bases and r.n_bases > 1 else ""
    return (f"{r.estimate:+.4g}{unit} [{r.ci_low:+.4g}, {r.ci_high:+.4g}] "
            f"({r.level:.1%}, {int(r.n_seeds)} seeds{bases})")


def verdict_counts(df: pd.DataFrame) -> str:
    """``"34 pass, 20 fail, 3 inconclusive, 2 not evaluated"`` for a claims frame."""
    counts = df["verdict"].value_counts()
    return ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VERDICTS)


def sync_readme(df: pd.DataFrame, out_dir: str | Path, *, quick: bool) -> Path | None:
    """Regenerate the README's per-paper verdict table from a full run's claims (see
    :func:`rlvr_lab.report.sync_readme`); None when nothing was written."""
    from rlvr_lab import report

    return report.sync_readme(df, out_dir, quick=quick)


def write_claims(results: list[Result], out_dir: Path, *, quick: bool,
                 keep: pd.DataFrame | None = None) -> pd.DataFrame:
    """Write ``claims.csv`` and ``CLAIMS.md`` of ``results``; ``keep``: rows of a stored table
    to carry over (experiments with no stored result), placed in experiment order."""
    df = claims_frame(results)
    if keep is not None and not keep.empty:
        df = (pd.concat([df, keep.reindex(columns=list(CLAIM_COLUMNS))], ignore_index=True)
              .sort_values("experiment", kind="stable").reset_index(drop=True))
    atomic_write_text(Path(out_dir) / "claims.csv", df.to_csv(index=False))
    atomic_write_text(Path(out_dir) / "CLAIMS.md", claims_markdown(df, quick=quick))
    return df


def select(only: str | None = None) -> list[str]:
    """Experiment names, optionally only those of one paper (case-insensitive)."""
    reg = registry()
    if only is None:
        return sorted(reg)
    by_paper = {p.lower(): p for p in papers()}
    if not isinstance(only, str) or only.lower() not in by_paper:
        raise ValueError(f"unknown paper {only!r}; valid: {', '.join(papers())}")
    return sorted(n for n, e in reg.items() if e.paper == by_paper[only.lower()])


def default_jobs() -> int:
    """Worker processes for ``reproduce``: 2 where there are at least 2 CPU cores (XLA's
    compiler is single-threaded and small models leave a core idle; two experiments at once
    fill it), else 1."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _run_in_worker(name: str, quick: bool, out: str, force: bool) -> Result:
    """A worker process's task (module level, so it pickles). After a full-run experiment the
    worker drops its compiled programs (see :func:`pool_options`; quick runs keep them for the
    next experiment)."""
    try:
        return run(name, quick=quick, out_dir=out, force=force, catch=True)
    finally:
        if not quick:
            import gc

            import jax
            jax.clear_caches()
            gc.collect()


# XLA:CPU maps every compiled kernel into memory (a few anonymous mappings each) and keeps it
# while its program lives. A full small-model study compiles thousands of kernels (one set per
# arm and SFT base), so a long-lived worker crossed Linux's default limit of 65530 mappings
# per process (``vm.max_map_count``) in two full runs of 2026-12-06 and died with "LLVM
# compilation error: Cannot allocate memory" (measured: about 60 new mappings a second during
# ``dars_small``, 17k after 5 minutes). Full runs therefore give each experiment a fresh
# worker (Python >= 3.11) and drop a worker's compiled programs after each experiment (3.10).
# One experiment's own kernels still count: the note below says how to raise the limit.
MAP_COUNT_WARN = 65530


def pool_options(quick: bool) -> dict:
    """Extra ``ProcessPoolExecutor`` options: one experiment per worker process in full runs
    (where an experiment runs for minutes, so a fresh process costs little); quick runs reuse
    workers (a fresh process per experiment would add about 3 s each)."""
    if quick or sys.version_info < (3, 11):
        return {}
    return {"max_tasks_per_child": 1}


def map_count_note() -> str:
    """A one-line warning when ``vm.max_map_count`` is at or below Linux's default (a full run's
    largest study may need more), else ``""``."""
    try:
        limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return ""
    if limit > MAP_COUNT_WARN:
        return ""
    return (f"note: vm.max_map_count is {limit}; if a worker dies with 'Cannot allocate "
            "memory', raise it (sudo sysctl -w vm.max_map_count=262144) and rerun: finished "
            "experiments are kept")


def _train_base(preset: str) -> str:
    """A worker process's task: train (and cache) the SFT base ``sft.PRESETS[preset]``."""
    from rlvr_lab.train import sft
    sft.load_or_train(sft.PRESETS[preset], verbose=False)
    return preset


def missing_bases(names_: Iterable[str], quick: bool, out: Path, force: bool) -> list[str]:
    """The ``sft_bases`` of the experiments among ``names_`` that will run (``force`` or no
    stored result for their config hash) whose checkpoints are not cached yet, in first-use
    order."""
    from rlvr_lab.train import sft
    todo: list[str] = []
    for name in names_:
        exp = get(name)
        # hashing the sources takes ~0.5 s per experiment: not needed when it will run anyway
        will_run = (force or not _result_path(out, name).exists()
                    or _stored(exp, quick=quick, seeds=None, out=out)[2] is None)
        for base in exp.sft_bases if will_run else ():
            if base not in todo and not sft.checkpoint_path(sft.PRESETS[base]).exists():
                todo.append(base)
    return todo


def _failed_claims(exp: Experiment, reason: str) -> list[Claim]:
    """Every declared claim of ``exp`` as failed, with ``reason``."""
    return [Claim(id=c, paper=exp.paper, statement="experiment failed", paper_value="",
                  measured=float("nan"), criterion="", verdict="fail", reason=reason,
                  experiment=exp.name, setting=exp.setting) for c in exp.claims]


def _failed(name: str, error: str) -> Result:
    exp = get(name)
    return Result(experiment=name, paper=exp.paper, claims=_failed_claims(exp, error),
                  figures=[], tables=[], seconds=0.0, config_hash="", error=error)


def _run_parallel(names_: list[str], jobs: int, quick: bool, out: Path, force: bool,
                  bar) -> list[Result]:
    """Run experiments in ``jobs`` fresh processes, the longest (by their last recorded time)
    first so the workers finish together. Missing SFT bases are trained first, one per worker
    (otherwise the first experiments would all wait on the first base's lock while one core
    trains it). Each experiment's numbers do not depend on where it runs (its own keys, its
    own process; a base is the same deterministic checkpoint whoever trains it). A pool broken
    by a dead worker is replaced once for the experiments it had not finished."""
    mode = "quick" if quick else "full"
    last = read_timings()
    order = sorted(names_, key=lambda n: -(last.get(n, {}).get(mode, {}).get("seconds")
                                           or float("inf")))
    done: dict[str, Result] = {}
    bases = missing_bases(order, quick, out, force)
    for attempt in (1, 2):
        broken = _pool_pass(order, bases, jobs, quick, out, force, bar, done,
                            last_attempt=attempt == 2)
        if not broken:
            break
        # a worker that dies (a segfault in native code) breaks the whole pool and fails every
        # experiment still queued; they run once more in a fresh pool (finished ones are kept)
        print(f"warning: a worker process died; rerunning {len(broken)} unfinished "
              f"experiment(s) in a fresh pool: {', '.join(broken)}", file=sys.stderr)
        note = map_count_note()
        if note:
            print(note, file=sys.stderr)
        order, bases = broken, []
    return [done[n] for n in names_]


def _pool_pass(order: list[str], bases: list, jobs: int, quick: bool, out: Path, force: bool,
               bar, done: dict, *, last_attempt: bool) -> list[str]:
    """One pool over ``order``; fills ``done`` and returns the experiments lost to a broken
    pool (recorded as failed only on the last attempt)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    broken = []
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             **pool_options(quick)) as pool:
        # queued first: the pool starts tasks in submission order; a failure here resurfaces
        # (with its traceback) in the experiments that load the base
        for preset in bases:
            pool.submit(_train_base, preset)
        futures = {pool.submit(_run_in_worker, n, quick, str(out), force): n for n in order}
        for fut in as_completed(futures):
            name = futures[fut]
            try:
                done[name] = fut.result()
            except BrokenProcessPool as err:
                if not last_attempt:
                    broken.append(name)
                    continue
                done[name] = _failed(name, f"worker process failed: {type(err).__name__}: "
                                           f"{err}")
            except Exception as err:  # noqa: BLE001 - a crashed worker fails its experiment
                done[name] = _failed(name, f"worker process failed: {type(err).__name__}: "
                                           f"{err}")
            bar.set_postfix_str(name)
            bar.update(1)
    return broken


def reproduce(*, quick: bool = False, only: str | None = None,
              out_dir: str | Path | None = None, progress: bool = True,
              force: bool = False, jobs: int = 1) -> tuple[list[Result], pd.DataFrame]:
    """Run (or reuse) every selected experiment and write claims.csv, CLAIMS.md and the
    paper-beside-ours figures (:mod:`rlvr_lab.paper_figures`).

    ``jobs`` > 1 runs that many experiments at once in separate processes (same numbers)."""
    from tqdm.auto import tqdm

    positive_int("jobs", jobs)
    _check_run_arguments(quick=quick, seeds=None, out_dir=out_dir, force=force, seed=0,
                         catch=True)
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress={progress!r} is not allowed; it must be True or False")
    names_ = select(only)
    out = Path(out_dir) if out_dir is not None else default_out_dir(quick)
    results = []
    if jobs > 1 and len(names_) > 1:
        with tqdm(total=len(names_), desc=f"reproduce ({jobs} processes)", unit="exp",
                  disable=not progress) as bar:
            results = _run_parallel(names_, jobs, quick, out, force, bar)
    else:
        bar = tqdm(names_, desc="reproduce", unit="exp", disable=not progress)
        for name in bar:
            bar.set_postfix_str(name)
            results.append(run(name, quick=quick, out_dir=out, force=force, catch=True))
    keep = None
    if only is not None:  # keep the other papers' rows of an earlier full table
        results = _merge_previous(out, results)
        keep = _rows_without_results(out, results)
    df = write_claims(results, out, quick=quick, keep=keep)
    from rlvr_lab import paper_figures  # the papers' numbers beside ours, from the table

    paper_figures.write_all(df, out)
    return results, df


def _merge_previous(out: Path, results: list[Result]) -> list[Result]:
    done = {r.experiment for r in results}
    merged = list(results)
    for name in names():
        if name in done:
            continue
        previous = _read_result(_result_path(out, name))
        if previous is not None:
            merged.append(previous)
    return sorted(merged, key=lambda r: r.experiment)


def _rows_without_results(out: Path, results: list[Result]) -> pd.DataFrame | None:
    """The rows of ``out/claims.csv`` of registered experiments that have no results file
    there (a fresh clone tracks the table, not ``results/``), so ``reproduce --only`` keeps
    them; an experiment whose results file exists but cannot be read is left out, as
    :func:`_merge_previous` leaves it."""
    path = Path(out) / "claims.csv"
    if not path.is_file():
        return None
    try:
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, ValueError, pd.errors.ParserError) as err:
        print(f"warning: ignoring unreadable {path}: {err}", file=sys.stderr)
        return None
    if "experiment" not in table.columns:
        return None
    have = {r.experiment for r in results}
    missing = {n for n in names() if n not in have and not _result_path(out, n).exists()}
    return table[table["experiment"].isin(missing)]


def format_table(df: pd.DataFrame, width: int | None = None) -> str:
    """A plain-text claims table for the terminal; under each failing or inconclusive row its
    reason, wrapped to ``width`` (default: the terminal's)."""
    import shutil
    import textwrap

    if df.empty:
        return "(no claims)"
    width = width or shutil.get_terminal_size((100, 24)).columns
    status = df["verdict"].map({"fail": "FAIL"}).fillna(df["verdict"])
    measured = [_interval_text(r) or (r.measured_text if pd.isna(r.measured) else (
        f"{r.measured:.4g} {r.unit}" if isinstance(getattr(r, "unit", None), str) and r.unit
        else f"{r.measured:.4g}")) for r in df.itertuples()]
    show = pd.DataFrame({"experiment": df["experiment"], "claim": df["claim"],
                         "measured": measured, "paper": df["paper_value"].fillna(""),
                         "status": status})
    with pd.option_context("display.max_colwidth", 44, "display.width", width):
        lines = show.to_string(index=False).splitlines()
    out = lines[:1]
    for line, r in zip(lines[1:], df.itertuples()):
        out.append(line)
        if r.verdict in ("fail", "inconclusive", claims_engine.NOT_APPLICABLE) and str(
                r.reason or "").strip():
            out.extend(textwrap.wrap(f"reason: {r.reason}", width=max(width, 40),
                                     initial_indent="    ", subsequent_indent="      "))
    return "\n".join(out)


def load(name: str, *, quick: bool = False, out_dir: str | Path | None = None,
         verbose: bool = True) -> pd.DataFrame:
    """The claims of experiment ``name`` as stored by its last run (one row per claim).

    Without ``out_dir`` it looks where ``rlvr-lab run`` writes (:func:`run_out_dir`:
    ``$RLVR_LAB_OUTPUT``, ``quick/`` for quick) and where ``rlvr-lab reproduce`` writes
    (:func:`default_out_dir`: the figures folder), takes the newer readable result, says which
    file it read (``verbose``) and records it in ``df.attrs["source"]``. Tables saved by the
    experiment are in ``<out>/data/<table>.csv.gz`` (``pd.read_csv``). Raises
    ``FileNotFoundError`` naming every file it tried when the experiment has not been run there.
    """
    outs = [Path(out_dir)] if out_dir is not None else _load_candidates(quick)
    found = []
    for out in outs:
        path = _result_path(out, name)
        result = _read_result(path)
        if result is not None:
            found.append((path.stat().st_mtime, path, result))
    if not found:
        tried = " or ".join(str(_result_path(out, name)) for out in outs)
        raise FileNotFoundError(f"no readable result for {name!r} at {tried}; run "
                                f"`rlvr-lab run {name}{' --quick' if quick else ''}` first")
    _, path, result = max(found, key=lambda f: f[0])
    if verbose and out_dir is None:
        print(f"{name}: loaded {path}")
    df = result.claims_frame()
    df.attrs["source"] = str(path)
    return df


def run_out_dir(quick: bool) -> Path:
    """Where ``rlvr-lab run`` writes by default (``$RLVR_LAB_OUTPUT``, ``quick/`` for quick)."""
    base = _io.output_dir()
    return base / "quick" if quick else base


def _load_candidates(quick: bool) -> list[Path]:
    """The folders :func:`load` searches: ``rlvr-lab run``'s, then ``reproduce``'s."""
    outs = [run_out_dir(quick), default_out_dir(quick)]
    return [o for i, o in enumerate(outs) if o.resolve() not in {p.resolve() for p in outs[:i]}]


def show_figures(result: Result, out_dir: str | Path, width: int = 720) -> list[Path]:
    """Display in a notebook the PNGs that ``result``'s run saved under ``out_dir`` (an
    experiment run from a notebook closes its figures; this shows them). Returns their paths;
    a figure whose file is missing is reported by name instead of raising."""
    shown = []
    for name in result.figures:
        path = Path(out_dir) / f"{name}.png"
        if _show_png(path, width):
            shown.append(path)
        else:
            print(f"{result.experiment}: figure {name!r} not found at {path}")
    return shown


def show_committed_figure(name: str, width: int = 720) -> Path | None:
    """Display the committed full-run figure ``<figures>/<name>.png`` (what a quick notebook
    run shows for an experiment it does not run at full size). Returns its path, or None (and
    says so) when there is none."""
    path = plotting.figures_dir() / f"{name}.png"
    if not path.exists():
        print(f"no committed full-run figure {name!r} at {path}")
        return None
    print(f"{name}: the committed full-run figure ({path.name})")
    _show_png(path, width)
    return path


def committed_claims(names: str | Iterable[str], claim_ids: Iterable[str] | None = None,
                     path: str | Path | None = None) -> pd.DataFrame:
    """The committed full run's ``claims.csv`` rows of experiment(s) ``names`` (optionally
    only ``claim_ids``): what a quick notebook shows for a study it does not run at full size.
    ``path`` defaults to ``<figures>/claims.csv``. An empty frame (with a line saying so) when
    there is no such file or row."""
    path = Path(path) if path is not None else plotting.figures_dir() / "claims.csv"
    names = [names] if isinstance(names, str) else list(names)
    if not path.is_file():
        print(f"no committed full-run claims at {path}")
        return pd.DataFrame()
    df = pd.read_csv(path)
    df = df[df.experiment.isin(names)]
    if claim_ids is not None:
        df = df[df.claim.isin(list(claim_ids))]
    if df.empty:
        print(f"no committed full-run claims of {', '.join(names)} in {path}")
    df = df.reset_index(drop=True)
    df.attrs["source"] = str(path)
    return df


def committed_table(name: str, path: str | Path | None = None) -> pd.DataFrame:
    """A table the committed full run saved, ``<figures>/data/<name>.csv.gz`` (``path``
    overrides the folder)."""
    folder = Path(path) if path is not None else plotting.figures_dir() / "data"
    return pd.read_csv(folder / f"{name}.csv.gz")


def _show_png(path: Path, width: int) -> bool:
    from IPython.display import Image, display

    if not path.exists():
        return False
    display(Image(filename=str(path), width=width))
    return True
