"""``rlvr-lab``: list experiments, run one, reproduce all claims, benchmark.

Bad input (unknown experiment, paper or bench peer, a bench peer not installed, bad seed or
job count, unknown or repeated flag, unwritable or too long --out, an XLA_FLAGS that XLA would
refuse) gets one line naming the value and what is allowed, exit status 2, no traceback,
nothing written; all of it is checked before any work. A write that fails later (full disk, a
folder made read-only) is one line, exit status 1, with nothing half-written left behind.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rlvr_lab.allocator import MALLOC_TUNABLES  # the command line restarts itself with these

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad command line; reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


MAX_SEEDS = 4096  # seeds are vmapped in memory; more than this is a typo, not a study
MAX_SHOWN = 80  # characters of a user value echoed in a one-line error


def _shown(text: str) -> str:
    """``text`` for an error message, truncated so the message stays one readable line."""
    text = str(text)
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "...")


def _bounded_int(flag: str, maximum: int, why: str = ""):
    """The argparse type of a count flag: ASCII digits, 1..``maximum``; the error names
    ``flag`` and the allowed range."""
    def parse(text: str) -> int:
        # int() accepts full-width digits, underscores and surrounding spaces; a count is
        # typed by a person, so anything but plain ASCII digits is more likely a mistake
        if not (text.isascii() and text.isdigit()):
            raise argparse.ArgumentTypeError(
                f"invalid {flag} value {_shown(text)}: must be a positive integer written with "
                f"ASCII digits 0-9, between 1 and {maximum}{why}")
        value = int(text, 10)
        if not 1 <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"invalid {flag} value {_shown(text)}: must be between 1 and {maximum}{why}")
        return value
    parse.__name__ = flag.lstrip("-")    # argparse names the type in some messages
    return parse


_positive_int = _bounded_int("--seeds", MAX_SEEDS)
# worker processes of `reproduce`: each holds its own JAX runtime; more than the machine's
# cores only queues them
MAX_JOBS = max(1, os.cpu_count() or 1)
_jobs = _bounded_int("--jobs", MAX_JOBS, " (this machine's CPU cores)")


def _peer(text: str) -> str:
    """The argparse type of ``bench --peer``: a known peer whose modules are installed (the
    error names the allowed peers or the extra to install)."""
    from rlvr_lab.benchmarks import peer

    try:
        return peer.check_peer(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).replace(repr(text), _shown(text))) from None


FORMATS = ("table", "md", "csv", "json")


def _render(df, fmt: str, *, quick: bool) -> str:
    """The claims frame as a terminal table, Markdown, CSV or JSON records."""
    from rlvr_lab import experiments

    if fmt == "md":
        return experiments.claims_markdown(df, quick=quick)
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return df.to_json(orient="records", indent=1)
    return experiments.format_table(df)


class _Once(argparse.Action):
    """An option that may be given once: a repeat would silently keep only the last value."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            raise UsageError(f"{option_string} given twice ({_shown(getattr(namespace, self.dest))}"
                             f" and {_shown(values)}); give it once")
        setattr(namespace, self.dest, values)


def _build_parser() -> argparse.ArgumentParser:
    from rlvr_lab import __version__

    parser = _Parser(prog="rlvr-lab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rlvr-lab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{list,run,reproduce,bench}",
                                parser_class=_Parser)
    sub.required = True
    sub.add_parser("list", help="experiments with their paper and claims")
    run = sub.add_parser("run", help="run one experiment")
    run.add_argument("name", help="experiment name (see `rlvr-lab list`)")
    run.add_argument("--quick", action="store_true", help="small settings (minutes -> seconds)")
    run.add_argument("--seeds", type=_positive_int, default=None, action=_Once,
                     help="number of seeds")
    run.add_argument("--out", default=None, action=_Once,
                     help="output folder (default $RLVR_LAB_OUTPUT or ~/.rlvr_lab/output, "
                          "/quick for --quick)")
    run.add_argument("--force", action="store_true", help="rerun even if a result exists")
    run.add_argument("--strict", action="store_true", help="exit 1 if a claim fails")
    run.add_argument("--format", choices=FORMATS, default=None, action=_Once,
                     help="claims output format (default table)")
    rep = sub.add_parser("reproduce", help="run all experiments, write claims.csv/CLAIMS.md")
    rep.add_argument("--quick", action="store_true", help="small settings, into figures/quick/")
    rep.add_argument("--only", default=None, action=_Once, metavar="PAPER",
                     help="only this paper's experiments")
    rep.add_argument("--strict", action="store_true", help="exit 1 if any claim fails")
    rep.add_argument("--format", choices=FORMATS, default=None, action=_Once,
                     help="claims output format (default table)")
    rep.add_argument("--force", action="store_true", help="rerun even if results exist")
    rep.add_argument("--jobs", type=_jobs, default=None, action=_Once, metavar="N",
                     help="experiments run at once, in separate processes (default 2 on a "
                          "machine with 2 or more cores, else 1; same numbers)")
    bench = sub.add_parser("bench", help="performance ratios")
    bench.add_argument("--quick", action="store_true", help="small sizes")
    bench.add_argument("--only", default=None, action=_Once, metavar="NAME", help="one measure")
    bench.add_argument("--json", action="store_true",
                       help="one JSON list of {name, ratio, details, goal, quick} on stdout")
    bench.add_argument("--save", action="store_true",
                       help="also write bench.json and bench.png/.pdf into the figures folder")
    bench.add_argument("--peer", type=_peer, default=None, action=_Once, metavar="NAME",
                       help="instead of the measures, time the small-model GRPO step against a "
                            "peer library on the same workload (trl; needs the 'peer' extra)")
    parser.subcommands = sub.choices
    return parser


OUT_HEADROOM = 160   # characters of a path kept for the files written inside --out


def _name_limits(path: Path) -> tuple[int, int]:
    """(longest file name, longest path) of the file system that would hold ``path``."""
    probe = path.absolute()
    while probe != probe.parent:
        try:
            if probe.is_dir():
                break
        except (OSError, ValueError):   # a name too long to look up, a NUL
            pass
        probe = probe.parent
    try:
        return os.pathconf(probe, "PC_NAME_MAX"), os.pathconf(probe, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        return 255, 4096


def _check_out_dir(out: str, what: str = "--out") -> Path:
    """The --out folder (or the folder an environment variable ``what`` names) must be
    creatable and writable; checked before any work."""
    try:
        return _check_out_path(out, what)
    except OSError as err:     # e.g. a parent folder that cannot be searched
        raise UsageError(f"{what} {_shown(out)} is not accessible: "
                         f"{err.strerror or type(err).__name__}") from None


def _check_out_path(out: str, what: str) -> Path:
    if not out.strip():
        raise UsageError(f"{what} '' is empty; give a folder path")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in out):
        raise UsageError(f"{what} {_shown(out)} contains a control character (NUL, newline, "
                         "tab, ...); give a plain folder path")
    if ".." in Path(out).parts:
        # mkdir would create the folders before '..' that the path then leaves again
        raise UsageError(f"{what} {_shown(out)} contains '..'; give the folder without it")
    path = Path(out)
    name_max, path_max = _name_limits(path)
    longest = max(path.parts, key=len, default="")
    if len(longest.encode(errors="surrogateescape")) > name_max:
        raise UsageError(f"{what} {_shown(out)} has a folder name of {len(longest)} characters; "
                         f"at most {name_max} are allowed per name")
    # room for the files written inside it (results/<experiment>.json, data/<table>.csv.gz)
    longest_path = path_max - 1 - OUT_HEADROOM
    if len(str(path.absolute()).encode(errors="surrogateescape")) > longest_path:
        raise UsageError(f"{what} {_shown(out)} is {len(str(path.absolute()))} characters long "
                         f"as an absolute path; at most {longest_path} are allowed")
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{what} {_shown(out)} is a dangling symbolic link")
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what} {_shown(out)} is not a directory")
    probe = path
    while not probe.exists():
        if probe.is_symlink() or probe == probe.parent:
            raise UsageError(f"{what} {_shown(out)} is not creatable")
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {_shown(out)} is not writable")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError:
        raise UsageError(f"{what} {_shown(out)} is not writable") from None
    return path


def _cmd_list(args) -> int:
    from rlvr_lab import experiments

    reg = experiments.registry()
    for module, err in experiments.LOAD_ERRORS.items():
        print(f"warning: simulations/{module}.py failed to import: {err}", file=sys.stderr)
    timings = experiments.read_timings()
    for name, exp in reg.items():
        times = timings.get(name, {})
        shown = "  ".join(f"{mode} {experiments.format_seconds(times.get(mode, {}).get('seconds'))}"
                          for mode in ("quick", "full"))
        print(f"{name}  [{exp.paper}]  ({shown})  {exp.description}")
        for c in exp.claims:
            print(f"    - {c}")
    return 0


def _cmd_run(args) -> int:
    from rlvr_lab import experiments

    if args.name not in experiments.names():
        raise UsageError(f"unknown experiment {_shown(args.name)}; valid: "
                         f"{', '.join(experiments.names())}")
    # `run` writes to the user's output folder; only `reproduce` writes the tracked figures/
    from rlvr_lab import io

    what = "--out"
    if args.out is None:
        args.out = str(io.output_dir() / "quick" if args.quick else io.output_dir())
        what = "RLVR_LAB_OUTPUT folder" if os.environ.get("RLVR_LAB_OUTPUT") else "output folder"
    out = where = _check_out_dir(args.out, what)
    if args.quick:
        _quick_compile_profile()
    result = experiments.run(args.name, quick=args.quick, seeds=args.seeds, out_dir=out,
                             force=args.force)
    state = "reused stored result" if result.skipped else f"{result.seconds:.1f} s"
    print(f"{args.name} ({result.paper}): {state}; figures in {where}")
    df = result.claims_frame()
    print(_render(df, args.format or "table", quick=args.quick))
    if result.error:
        print(f"error in {args.name}: {result.error.strip().splitlines()[-1]}", file=sys.stderr)
        return 1
    return 1 if (args.strict and (df["verdict"] == "fail").any()) else 0


QUICK_XLA_FLAG = "--xla_backend_optimization_level=1"
_COMMAND_LINE = {"active": False}     # main() called from a command line (argv from sys.argv)


def _switched_off(value: str | None) -> bool:
    """An on-by-default environment switch (``RLVR_LAB_QUICK_XLA``, ``RLVR_LAB_MALLOC_TUNING``)
    set to 0/off/false/no."""
    return (value or "").strip().lower() in ("0", "off", "false", "no")


def _cpu_only() -> bool:
    """No accelerator plugin of jax is installed (then XLA compiles for the CPU)."""
    from importlib import metadata

    names = {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}
    return not any(n.startswith(("jax-cuda", "jax_cuda", "jax-rocm", "libtpu")) for n in names)


def _quick_compile_profile() -> None:
    """Quick runs on a CPU compile with XLA's backend optimisation level 1: about 40% less
    compile time, the same run time for these small programs (measured on `tiny_grpo`:
    backend compile 13.1 -> 8.0 s, wall 33.5 -> 26.8 s). Set before any computation (XLA reads
    its flags when the backend starts; worker processes inherit them). Numbers differ from the
    default level at float rounding only. A user's own XLA_FLAGS win; RLVR_LAB_QUICK_XLA=0
    turns it off."""
    if not _COMMAND_LINE["active"]:
        return      # called in-process (tests, notebooks): leave that process's XLA alone
    if _switched_off(os.environ.get("RLVR_LAB_QUICK_XLA")):
        return
    if _cpu_only():
        from rlvr_lab import io
        io.append_xla_flag(QUICK_XLA_FLAG)




COMPUTING_COMMANDS = ("run", "reproduce", "bench")   # the commands run under the tuning


def malloc_tuned_env(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment to restart the command line with, :data:`MALLOC_TUNABLES` added to
    ``GLIBC_TUNABLES`` (a user's own value of any of them wins), or None to keep this one
    (nothing to add, or RLVR_LAB_MALLOC_TUNING is 0/off).

    Why: XLA:CPU allocates a program's temporaries at every call, from the calling thread's
    malloc arena; the small model's update has 155 MB of them, more than a thread arena can
    hold, so glibc maps fresh pages for every call and unmaps them after (~40k page faults,
    ~100 ms of kernel time per call). With one arena and no mmap the block is reused from
    the heap; huge pages cut the faults of its first use. Measured on the ``rl_step_mfu``
    bench step (one seed): update ~170 -> ~116 ms, 0 page faults per call; decoding and the
    bank trainers unchanged. glibc reads tunables only when a process starts, hence a
    restart; worker processes inherit the setting. Other C libraries ignore it."""
    if _switched_off(environ.get("RLVR_LAB_MALLOC_TUNING")):
        return None
    current = environ.get("GLIBC_TUNABLES", "")
    present = {item.split("=", 1)[0] for item in current.split(":") if item}
    added = [f"{k}={v}" for k, v in MALLOC_TUNABLES.items() if k not in present]
    if not added:
        return None
    return {**environ, "GLIBC_TUNABLES": ":".join(([current] if current else []) + added)}


def _restart_with_malloc_tuning() -> None:
    """On Linux with glibc, from a command line only: exec this command again under
    :func:`malloc_tuned_env` (nothing has run yet; arguments, exit status and streams carry
    over)."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    env = malloc_tuned_env(os.environ)
    if env is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        # the same entry point as the ``rlvr-lab`` script (importing rlvr_lab.cli, not __main__)
        code = "import sys; from rlvr_lab.cli import main; sys.exit(main())"
        os.execve(sys.executable, [sys.executable, "-c", code, *sys.argv[1:]], env)


def _cmd_reproduce(args) -> int:
    from rlvr_lab import experiments

    if args.only is not None:
        papers = experiments.papers()
        if args.only.lower() not in {p.lower() for p in papers}:
            raise UsageError(f"unknown paper {_shown(args.only)}; valid: {', '.join(papers)}")
    _check_out_dir(str(experiments.default_out_dir(args.quick)),
                   "RLVR_LAB_FIGURES folder" if os.environ.get("RLVR_LAB_FIGURES")
                   else "figures folder")
    if args.quick:
        _quick_compile_profile()
    jobs = experiments.default_jobs() if args.jobs is None else args.jobs
    results, df = experiments.reproduce(quick=args.quick, only=args.only, force=args.force,
                                        jobs=jobs)
    out = experiments.default_out_dir(args.quick)
    experiments.sync_readme(df, out, quick=args.quick)  # README verdict table (full runs)
    print(_render(df, args.format or "table", quick=args.quick))
    failed = int(df["verdict"].isin(["fail", "inconclusive"]).sum())
    errors = [r for r in results if r.error]
    for r in errors:
        print(f"error in {r.experiment}: {r.error.strip().splitlines()[-1]}", file=sys.stderr)
    print(f"{len(df)} claims: {experiments.verdict_counts(df)}; written to "
          f"{out / 'claims.csv'} and {out / 'CLAIMS.md'}")
    if errors:
        return 1
    return 1 if (args.strict and failed) else 0


def _cmd_bench(args) -> int:
    from rlvr_lab import benchmarks

    if args.peer is not None:
        return _bench_peer(args)
    names = benchmarks.names()
    if args.only is not None:
        if args.only not in names:
            raise UsageError(f"unknown benchmark {_shown(args.only)}; valid: "
                             f"{', '.join(names)}")
        names = [args.only]
    measures = []
    for name in names:
        measure = benchmarks.run(name, quick=args.quick)
        measures.append(measure)
        # with --json the lines go to stderr, so stdout is one JSON document
        print(measure.line(), file=sys.stderr if args.json else sys.stdout, flush=True)
    records = [m.as_dict(quick=args.quick) for m in measures]
    if args.json:
        print(json.dumps(records, indent=1))
    if args.save:
        from rlvr_lab import io, plotting

        out = io.figures_dir()
        io.atomic_write_text(out / "bench.json", json.dumps(records, indent=1) + "\n")
        title = (f"rlvr-lab bench{' --quick' if args.quick else ''}, {os.cpu_count()} CPU "
                 f"cores ({benchmarks.cpu_description()}), {time.strftime('%Y-%m-%d')}")
        plotting.save_figure(benchmarks.figure(measures, title=title), "bench", out)
        print(f"wrote {out / 'bench.json'} and bench.png/.pdf", file=sys.stderr)
        from rlvr_lab import report

        report.sync_block(benchmarks.readme_block(records, title, figures="../figures"), out,
                          benchmarks.README_START, benchmarks.README_END,
                          readme=report.ROOT / benchmarks.README_PAGE)
    return 0


def _bench_peer(args) -> int:
    """``bench --peer NAME``: one line, rlvr_lab's step against the peer's (not part of the
    saved table: it needs the peer installed)."""
    for flag, given in (("--only", args.only is not None), ("--save", args.save)):
        if given:
            raise UsageError(f"{flag} is not allowed with --peer; --peer prints its own line "
                             "(with --json for scripts)")
    from rlvr_lab.benchmarks import peer

    measure = peer.run(args.peer, quick=args.quick)
    print(measure.line(), file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps([measure.as_dict(quick=args.quick)], indent=1))
    return 0


_UNKNOWN_XLA_FLAG = re.compile(r"Unknown flags? in XLA_FLAGS:\s*(.*)")
_XLA_CHECKED: dict[str, str | None] = {}   # XLA_FLAGS value -> problem (None: fine)


def _xla_flags_problem(flags: str) -> str | None:
    """What is wrong with ``XLA_FLAGS=flags``, or None. XLA parses the variable when its
    backend starts and aborts the process on an unknown flag or a bad value (a fatal log,
    exit 1, after any work done before); a tiny subprocess starts a CPU backend with the
    same environment first (about 2 s, once per value and process)."""
    if flags in _XLA_CHECKED:
        return _XLA_CHECKED[flags]
    import subprocess

    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    try:
        probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env,
                               capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None                     # cannot tell: let XLA itself decide later
    problem = None
    if probe.returncode != 0:
        lines = probe.stderr.splitlines()
        unknown = [m.group(1).strip() for m in map(_UNKNOWN_XLA_FLAG.search, lines) if m]
        value = [ln.split("]", 1)[-1].strip() for ln in lines if "Couldn't interpret" in ln]
        if unknown:
            problem = (f"XLA_FLAGS has unknown flags {_shown(unknown[0])}; allowed: XLA's "
                       "--xla_* flags (unset XLA_FLAGS or remove them)")
        elif value:
            problem = f"XLA_FLAGS={_shown(flags)} is not allowed: {value[0]}"
        elif any("XLA_FLAGS" in ln or "parse_flags_from_env" in ln for ln in lines):
            problem = (f"XLA_FLAGS={_shown(flags)} is not accepted by XLA; allowed: "
                       "space-separated --xla_*=value flags")
    _XLA_CHECKED[flags] = problem
    return problem


def _check_cache_dirs() -> None:
    """``RLVR_LAB_CACHE`` / ``RLVR_LAB_XLA_CACHE``, when set, must name usable folders."""
    from rlvr_lab import io

    if os.environ.get("RLVR_LAB_CACHE"):
        _check_out_dir(str(io.cache_dir()), "RLVR_LAB_CACHE")
    xla = os.environ.get("RLVR_LAB_XLA_CACHE")
    if xla and io.xla_cache_dir() is not None:
        _check_out_dir(str(io.xla_cache_dir()), "RLVR_LAB_XLA_CACHE")


def _check_xla_flags() -> None:
    """A bad ``XLA_FLAGS`` is one usage error before any work starts."""
    flags = os.environ.get("XLA_FLAGS", "")
    if flags.strip():
        problem = _xla_flags_problem(flags)
        if problem:
            raise UsageError(problem)


def _os_error_line(err: OSError) -> str:
    """One line for an OSError: a WriteError's own text, else the reason and the file."""
    from rlvr_lab import io

    if isinstance(err, io.WriteError):
        return str(err).splitlines()[0] if str(err) else "write failed"
    reason = err.strerror or str(err) or type(err).__name__
    where = f": {_shown(err.filename)}" if err.filename else ""
    return f"{reason}{where}".splitlines()[0]


def main(argv: Sequence[str] | None = None) -> int:
    _COMMAND_LINE["active"] = argv is None
    parser = _build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            sub = parser.subcommands[args.command]
            allowed = sorted(o for o in sub._option_string_actions if o.startswith("--"))
            raise UsageError(f"unrecognized argument {_shown(extra[0])} for '{args.command}'; "
                             f"allowed: {', '.join(allowed)}")
        handler = {"list": _cmd_list, "run": _cmd_run, "reproduce": _cmd_reproduce,
                   "bench": _cmd_bench}[args.command]
        if argv is None and args.command in COMPUTING_COMMANDS:
            # after parsing (a bad flag fails fast) and only where it pays: a restart imports
            # the package again (~2 s)
            _restart_with_malloc_tuning()
        if args.command in COMPUTING_COMMANDS:
            _check_cache_dirs()
            _check_xla_flags()
        return handler(args)
    except UsageError as err:
        print(f"rlvr-lab: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        # a write that failed after the work started (full disk, a folder made read-only):
        # one line, exit 1; the writers leave nothing half-written (rlvr_lab.io.WriteError)
        print(f"rlvr-lab: error: {_os_error_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rlvr-lab: interrupted; finished experiments are kept", file=sys.stderr)
        # returning runs interpreter shutdown while XLA's threads may still be working, which
        # crashed with SIGSEGV; flush and leave without that teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
