"""In-process malloc tuning: which mallopt calls are made, the opt-out, and the one-line note
when the settings cannot apply (a fake libc records the calls; nothing real is changed)."""
import pytest

from rlvr_lab import allocator


class FakeLibc:
    def __init__(self, accept=True, refuse=()):
        self.calls, self.accept, self.refuse = [], accept, set(refuse)

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return 1 if self.accept and param not in self.refuse else 0


def test_applies_every_mallopt_setting_of_the_tunables():
    libc = FakeLibc()
    assert allocator.tune_in_process(libc=libc, environ={}) == "tuned"
    # glibc's malloc.h numbers: M_ARENA_MAX=-8, M_MMAP_MAX=-4, M_TRIM_THRESHOLD=-1
    assert libc.calls == [(-8, 1), (-4, 0), (-1, 1 << 30)]
    # the same values as the GLIBC_TUNABLES the command line sets
    tun = allocator.MALLOC_TUNABLES
    assert (tun["glibc.malloc.arena_max"], tun["glibc.malloc.mmap_max"],
            tun["glibc.malloc.trim_threshold"]) == ("1", "0", str(1 << 30))


def test_opt_out_partial_refusal_and_already_tuned(capsys):
    libc = FakeLibc()
    assert allocator.tune_in_process(libc=libc, environ={"RLVR_LAB_MALLOC": "0"}).startswith("off")
    assert libc.calls == []
    part = FakeLibc(refuse={-8})
    assert allocator.tune_in_process(libc=part, environ={}) == "tuned except arena_max"
    env = {"GLIBC_TUNABLES": ":".join(f"{k}={v}" for k, v in allocator.MALLOC_TUNABLES.items())}
    assert allocator.tune_in_process(libc=FakeLibc(), environ=env).startswith("already")
    refused = allocator.tune_in_process(libc=FakeLibc(accept=False), environ={})
    assert refused.startswith("not applied")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "RLVR_LAB_MALLOC=0" in out[0]


def test_bad_opt_out_value_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"RLVR_LAB_MALLOC='yes' is not allowed; use 1"):
        allocator.tune_in_process(libc=FakeLibc(), environ={"RLVR_LAB_MALLOC": "yes"})


def test_this_process_gets_a_definite_answer():
    # on this machine (glibc or not) the call returns one of the documented outcomes
    got = allocator.tune_in_process()
    assert got.split(" ")[0] in ("tuned", "off", "already", "not")


def test_quiet_call_neither_prints_nor_keeps_a_refusal(capsys, monkeypatch):
    monkeypatch.setattr(allocator, "_state", {})
    monkeypatch.setattr(allocator, "_mallopt_all", lambda libc: "not applied: no glibc here")
    assert allocator.tune_in_process(environ={}, quiet=True).startswith("not applied")
    assert capsys.readouterr().out == "" and allocator._state == {}
    allocator.tune_in_process(environ={})          # the trainer's call says it, once
    assert capsys.readouterr().out.count("not applied") == 1


def test_import_tunes_before_jax_runs_and_never_fails_on_a_bad_opt_out():
    import subprocess
    import sys
    probe = ("import rlvr_lab, jax; from rlvr_lab import allocator; "
             "print(allocator._state.get('result', 'not kept'))")
    import platform
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    for value, want in (("1", ("tuned", "already") if glibc else ("not kept",)),
                        ("0", ("off",)), ("yes", ("not kept",))):
        env = {k: v for k, v in __import__("os").environ.items() if k != "GLIBC_TUNABLES"}
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env={**env, "RLVR_LAB_MALLOC": value}, check=True).stdout
        assert out.strip().startswith(want), (value, out)
