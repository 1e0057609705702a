"""``rlvr-lab``: list experiments, run one, reproduce all claims, benchmark.

Bad input (unknown experiment or paper, bad seed count, unknown flag, unwritable --out) gets
one line naming the value and what is allowed, exit status 2, no traceback, nothing written.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad command line; reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --seeds value {text!r}: must be a positive integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"invalid --seeds value {text!r}: must be a positive integer (>= 1)")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rlvr-lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="{list,run,reproduce,bench}",
                                parser_class=_Parser)
    sub.required = True
    sub.add_parser("list", help="experiments with their paper and claims")
    run = sub.add_parser("run", help="run one experiment")
    run.add_argument("name", help="experiment name (see `rlvr-lab list`)")
    run.add_argument("--quick", action="store_true", help="small settings (minutes -> seconds)")
    run.add_argument("--seeds", type=_positive_int, default=None, help="number of seeds")
    run.add_argument("--out", default=None, help="output folder (default figures/ or "
                                                 "figures/quick/)")
    run.add_argument("--force", action="store_true", help="rerun even if a result exists")
    rep = sub.add_parser("reproduce", help="run all experiments, write claims.csv/CLAIMS.md")
    rep.add_argument("--quick", action="store_true", help="small settings, into figures/quick/")
    rep.add_argument("--only", default=None, metavar="PAPER", help="only this paper's experiments")
    rep.add_argument("--strict", action="store_true", help="exit 1 if any claim fails")
    rep.add_argument("--force", action="store_true", help="rerun even if results exist")
    bench = sub.add_parser("bench", help="performance ratios")
    bench.add_argument("--quick", action="store_true", help="small sizes")
    bench.add_argument("--only", default=None, metavar="NAME", help="one measure")
    parser.subcommands = sub.choices
    return parser


def _check_out_dir(out: str) -> Path:
    """The --out folder must be creatable and writable; checked before any work."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out!r} is not a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out!r} is not writable")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError:
        raise UsageError(f"--out {out!r} is not writable") from None
    return path


def _cmd_list(args) -> int:
    from rlvr_lab import experiments

    reg = experiments.registry()
    for module, err in experiments.LOAD_ERRORS.items():
        print(f"warning: simulations/{module}.py failed to import: {err}", file=sys.stderr)
    for name, exp in reg.items():
        print(f"{name}  [{exp.paper}]  {exp.description}")
        for c in exp.claims:
            print(f"    - {c}")
    return 0


def _cmd_run(args) -> int:
    from rlvr_lab import experiments

    if args.name not in experiments.names():
        raise UsageError(f"unknown experiment {args.name!r}; valid: "
                         f"{', '.join(experiments.names())}")
    out = _check_out_dir(args.out) if args.out is not None else None
    result = experiments.run(args.name, quick=args.quick, seeds=args.seeds, out_dir=out,
                             force=args.force)
    where = out if out is not None else experiments.default_out_dir(args.quick)
    state = "reused stored result" if result.skipped else f"{result.seconds:.1f} s"
    print(f"{args.name} ({result.paper}): {state}; figures in {where}")
    print(experiments.format_table(result.claims_frame()))
    return 0


def _cmd_reproduce(args) -> int:
    from rlvr_lab import experiments

    if args.only is not None:
        papers = experiments.papers()
        if args.only.lower() not in {p.lower() for p in papers}:
            raise UsageError(f"unknown paper {args.only!r}; valid: {', '.join(papers)}")
    results, df = experiments.reproduce(quick=args.quick, only=args.only, force=args.force)
    out = experiments.default_out_dir(args.quick)
    print(experiments.format_table(df))
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

    names = benchmarks.names()
    if args.only is not None:
        if args.only not in names:
            raise UsageError(f"unknown benchmark {args.only!r}; valid: {', '.join(names)}")
        names = [args.only]
    for name in names:
        print(benchmarks.run(name, quick=args.quick).line(), flush=True)
    return 0


def main(argv=None) -> int:
    parser = _build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            sub = parser.subcommands[args.command]
            allowed = sorted(o for o in sub._option_string_actions if o.startswith("--"))
            raise UsageError(f"unrecognized argument {extra[0]!r} for '{args.command}'; "
                             f"allowed: {', '.join(allowed)}")
        handler = {"list": _cmd_list, "run": _cmd_run, "reproduce": _cmd_reproduce,
                   "bench": _cmd_bench}[args.command]
        return handler(args)
    except UsageError as err:
        print(f"rlvr-lab: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rlvr-lab: interrupted; finished experiments are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
