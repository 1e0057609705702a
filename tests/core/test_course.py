"""The course: its path, runtime lines, links, and the exercise checks (right answers pass,
wrong ones fail with a reason, None only hints)."""
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import bibliography, course

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
CHECKED = ("00_", "01_", "02_", "03_", "04_", "05_", "06_", "07_", "08_", "09_", "10_")


def test_course_path_covers_every_notebook_in_90_minutes():
    listed = [lesson.notebook for lesson in (*course.COURSE, *course.FURTHER)]
    assert sorted(listed) == sorted(p.stem for p in SOURCES)
    assert sum(lesson.minutes for lesson in course.COURSE) == 90
    assert course.COURSE[0].notebook == "00_quickstart"


@pytest.mark.parametrize("py", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_notebook_states_its_runtime_at_the_top(py):
    text = py.read_text()
    first_cell = text.split("# %% [markdown]", 1)[1].split("# %%", 1)[0]
    assert re.search(r"^# \*\*Runtime:\*\* ", first_cell, re.M), "no runtime line at the top"
    assert "quick_mode(default=True)" in text


@pytest.mark.parametrize("py", [p for p in SOURCES if p.name.startswith(CHECKED)],
                         ids=lambda p: p.stem)
def test_every_exercise_has_a_check_cell(py):
    text = py.read_text().split("# ## Exercises", 1)[1]
    exercises = re.findall(r"^# \*\*(\d+)\.\*\*", text, re.M)
    checks = re.findall(r"^course\.check_\w+\(", text, re.M)
    assert exercises and len(checks) == len(exercises)


def test_runtime_line_round_trip(tmp_path):
    text = "# %% [markdown]\n# # Title\n#\n# **Runtime:** to be measured\n"
    assert course.set_runtime_line(text, None).endswith(course.TO_BE_MEASURED + "\n")
    entry = course.record_runtime("00_x", 213.4, tmp_path / "r.json", cores=2, date="2026-01-01")
    assert course.runtimes(tmp_path / "r.json")["00_x"]["seconds"] == 213.4
    line = course.set_runtime_line(text, entry)
    assert "# **Runtime:** 3 min 33 s in quick mode on 2 CPU cores" in line
    assert course.set_runtime_line("**Runtime:** old", entry).startswith("**Runtime:** 3 min")
    with pytest.raises(ValueError):
        course.set_runtime_line("no line", entry)


def test_links_come_from_the_declared_repository(tmp_path):
    assert course.repository_url(tmp_path) is None
    (tmp_path / "CITATION.cff").write_text("repository-code: 'https://github.com/o/r.git'\n")
    assert course.repository_url(tmp_path) == "https://github.com/o/r"
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.urls]\nRepository = "https://github.com/a/b/"\n')
    url = course.repository_url(tmp_path)
    assert url == "https://github.com/a/b"
    assert course._project_urls('[project.urls]\nRepository = "u"\n') == {"Repository": "u"}
    links = course.notebook_links("00_quickstart", url)
    assert links["colab"] == ("https://colab.research.google.com/github/a/b/blob/main/"
                              "notebooks/00_quickstart.ipynb")
    assert links["nbviewer"].startswith("https://nbviewer.org/github/a/b/blob/main/")
    assert course.notebook_links("x", None) == {} == course.notebook_links("x", "https://x.org/r")
    block = course.course_block(url, {})
    assert "[colab](https://colab.research.google.com/github/a/b/" in block
    assert "No Colab" in course.course_block("", {})


def test_committed_course_table_is_current():
    text = (NOTEBOOKS / "README.md").read_text()
    assert bibliography.replace_block(text, course.course_block(), course.COURSE_START,
                                      course.COURSE_END) == text, (
        "notebooks/README.md course table is stale: run `python -m rlvr_lab.course`")


def _right(verdict):
    return bool(verdict) and "right" in verdict.message


def _wrong(verdict):
    return not verdict and "not yet" in verdict.message and "Hint:" in verdict.message


def test_checks_accept_right_answers_and_explain_wrong_ones(capsys):
    p = np.array([0.1, 0.5, 0.9])
    assert _right(course.check_wasted_fraction(p, 8, np.mean(p**8 + (1 - p)**8)))
    assert _wrong(course.check_wasted_fraction(p, 8, 0.5))
    assert _right(course.check_changed_modes({"token-mean", "seq-mean-token-sum-norm"}))
    assert _wrong(course.check_changed_modes({"token-mean"}))
    assert _right(course.check_adam_batch_scaling(True, False))
    assert _wrong(course.check_adam_batch_scaling(False, False))
    assert _right(course.check_multilevel_rewards({"231>132": 2.0, "23>132": 0.0,
                                                   "231>13": 0.0}))
    assert _wrong(course.check_multilevel_rewards({"231>132": 2.0, "23>132": 1.5,
                                                   "231>13": 0.0}))
    assert _right(course.check_pass_at_k(1 - (12 * 11 * 10 * 9) / (16 * 15 * 14 * 13)))
    assert _right(course.check_all_equal_fraction(0.9**8 + 0.1**8))
    assert _right(course.check_binary_flips(0.0))
    assert _wrong(course.check_binary_flips(0.1))
    assert _right(course.check_outlier_share(1 - 0.95**8))
    assert _right(course.check_mad_advantage(1 / 1e-3))
    assert _right(course.check_expected_cumulative_advantage(
        lambda q, n: 2 * (n - 1) * q * (1 - q)))
    assert _wrong(course.check_expected_cumulative_advantage(lambda q, n: 2 * n * q * (1 - q)))
    assert _right(course.check_hw_extra(56, 2.75))
    assert _right(course.check_bank_shares_parameters(False))
    assert _right(course.check_group_advantage(
        lambda r: (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + 1e-6)))
    assert _wrong(course.check_group_advantage(
        lambda r: (r - r.mean(-1, keepdims=True)) / (r.std(-1, keepdims=True) + 1e-6)))

    def clipped(logp, old, adv):
        ratio = jnp.exp(logp - old)
        return -jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
    assert _right(course.check_clipped_loss(clipped))
    assert _wrong(course.check_clipped_loss(lambda lp, old, a: -(jnp.exp(lp - old) * a).mean()))
    assert _right(course.check_rloo_factor(8 / 7))
    assert _right(course.check_full_coverage(0.0, True))
    assert _wrong(course.check_full_coverage(0.1, True))
    assert _right(course.check_mass_vs_tokens(True))
    assert _right(course.check_all_equal_fraction((1 - 1e-4) ** 512, p=1e-4, group_size=512,
                                                  exercise="04.3"))
    assert _right(course.check_cures_uniform_ratio(np.exp(0.005)))
    assert _right(course.check_neyman_factor(2 * (0.0099 + 0.25) / (0.0995 + 0.5) ** 2))
    assert _wrong(course.check_neyman_factor(1.0))
    assert _right(course.check_e3_temperature(1 + np.log(2) / (np.log(16) + np.log(np.log(16)))))
    assert _right(course.check_staleness_bound(3))
    assert _wrong(course.check_staleness_bound(2))
    from rlvr_lab.papers.systems.engine import ENGINE_PRESETS
    e = ENGINE_PRESETS["8b"]
    assert _right(course.check_decode_limit(1 / (e.tau1 + e.tau2 * 3000)))
    assert _right(course.check_april_tail("Moderate"))
    assert _wrong(course.check_april_tail("heavy"))
    waiting = course.check_rloo_factor(None)
    assert not waiting and "no answer yet" in waiting.message
    assert "[10.3, G=8] right" in capsys.readouterr().out


def test_runtime_line_says_when_other_jobs_shared_the_machine():
    from rlvr_lab import course
    idle = {"seconds": 75.0, "cores": 2, "date": "2026-12-06", "load": 0.4}
    assert "upper bound" not in course.runtime_text(idle)
    busy = dict(idle, load=5.3)
    assert "while other jobs shared the cores, load 5.3: an upper bound" in \
        course.runtime_text(busy)
    flagged = {"seconds": 75.0, "cores": 2, "date": "2026-12-06", "shared": True}
    assert "shared the cores: an upper bound" in course.runtime_text(flagged)


def test_checks_of_notebooks_07_to_09(capsys):
    import pandas as pd

    # 07: SPEC-RL's half-reuse lenience, the cut's distribution, k3, E4M3's outlier onset
    assert _right(course.check_half_reuse_lenience(0.0))
    wrong = course.check_half_reuse_lenience(0.5)
    assert _wrong(wrong) and "keeps 0.95 of its tokens" in wrong.message
    assert _right(course.check_cut_distribution("Residual"))
    assert _wrong(course.check_cut_distribution("new"))
    assert _right(course.check_k3_small_mismatch(np.expm1(0.005)))
    assert _right(course.check_k3_small_mismatch(0.005))          # the approximation
    assert "never negative" in course.check_k3_small_mismatch(-0.005).message
    assert _wrong(course.check_k3_small_mismatch(0.1))
    assert _right(course.check_e4m3_outlier_onset(448 / 2 ** -6))
    wrong = course.check_e4m3_outlier_onset(256)
    assert _wrong(wrong) and "still a normal number" in wrong.message
    # 08: the purchase trap (exact DP), refresh steps, the expert's advantage
    import jax
    from rlvr_lab.envs import toy_web as W
    from rlvr_lab.papers.dynaweb.config import DynaConfig
    config = DynaConfig(num_steps=60)
    site = W.generate_site(jax.random.key(0), config.site)
    p = course.purchase_trap_probability(site, config.horizon)
    assert 0 < p < 1
    assert _right(course.check_purchase_trap(p, site=site, horizon=config.horizon))
    assert _wrong(course.check_purchase_trap(p * 2, site=site, horizon=config.horizon))
    assert "Pass site=" in course.check_purchase_trap(p).message
    assert _right(course.check_refresh_steps(2, num_steps=60, refresh_every=30))
    assert _wrong(course.check_refresh_steps(6, num_steps=60, refresh_every=30))
    assert _right(course.check_expert_advantage(7 / 8 / np.sqrt(1 / 8)))
    wrong = course.check_expert_advantage(0.0)
    assert _wrong(wrong) and "without* the expert" in wrong.message
    # 09: judged on the student's own rerun tables
    curves = pd.DataFrame(dict(arm=["tf", "sar", "sar_argmax"] * 2, step=[0] * 3 + [9] * 3,
                               fd=[1.0, 1.0, 1.0, 0.2, 0.5, 0.3]))
    assert _right(course.check_argmax_gap(True, curves))
    wrong = course.check_argmax_gap(False, curves)
    assert _wrong(wrong) and "your run says otherwise" in wrong.message
    assert "no answer yet" in course.check_argmax_gap(True).message   # no curves passed
    assert _wrong(course.check_argmax_gap(True, curves[curves.arm != "sar_argmax"]))
    scales = pd.DataFrame(dict(arm=["sar"] * 3 + ["sar_distill"] * 3, seed=0,
                               scale=[0, 1, 2] * 2, mismatch=[0.1, 0.5, 0.2, 0.1, 0.1, 0.25]))
    assert _right(course.check_distill_scale(1, scales))
    assert _wrong(course.check_distill_scale(2, scales))
    assert _right(course.check_perfect_base(False))
    assert _wrong(course.check_perfect_base(True))
    assert "[08.3, G=8] right" in capsys.readouterr().out


def _pair(folder, name, runtime="**Runtime:** 5 s in quick mode"):
    """A minimal notebook pair (jupytext source + .ipynb) with a runtime line."""
    import jupytext
    import nbformat

    py = folder / f"{name}.py"
    py.write_text("# ---\n# jupyter:\n#   jupytext:\n#     formats: ipynb,py:percent\n# ---\n\n"
                  f"# %% [markdown]\n# # Title\n#\n# {runtime}\n#\n# Text.\n\n# %%\nx = 1\n")
    nbformat.write(jupytext.read(py), py.with_suffix(".ipynb"))
    return py


def test_links_are_written_into_the_readme_and_every_header_cell(tmp_path):
    import jupytext
    import nbformat

    folder = tmp_path / "notebooks"
    folder.mkdir()
    readme = folder / "README.md"
    readme.write_text(f"# Course\n\n{course.COURSE_START}\nold\n{course.COURSE_END}\n")
    py = _pair(folder, "00_quickstart")
    before = {p: p.read_text() for p in (readme, py, py.with_suffix(".ipynb"))}
    # no URL declared: nothing is written
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert course.sync_links(tmp_path) == []
    assert {p: p.read_text() for p in before} == before
    # a declared URL: the README table and both files of the pair get the links
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.urls]\nRepository = "https://github.com/o/r"\n')
    changed = course.sync_links(tmp_path)
    assert set(changed) == {readme, py, py.with_suffix(".ipynb")}
    colab = ("https://colab.research.google.com/github/o/r/blob/main/notebooks/"
             "00_quickstart.ipynb")
    assert f"[colab]({colab})" in readme.read_text() and "No Colab" not in readme.read_text()
    text = py.read_text()
    assert f"# **Open:** [Open in Colab]({colab})" in text
    assert text.index("**Runtime:**") < text.index("**Open:**") < text.index("Text.")
    first = nbformat.read(py.with_suffix(".ipynb"), as_version=4).cells[0].source
    assert f"**Open:** [Open in Colab]({colab})" in first
    assert "nbviewer.org/github/o/r/blob/main/notebooks/00_quickstart.ipynb" in first
    # the pair stays in sync, and a second run changes nothing
    assert [c.source for c in jupytext.read(py).cells] == [
        c.source for c in nbformat.read(py.with_suffix(".ipynb"), as_version=4).cells]
    assert course.sync_links(tmp_path) == []
    # a runtime update keeps the links line; removing the URL's line removes it
    assert "**Open:**" in course.set_runtime_line(text, None)
    assert "**Open:**" not in course.set_links_line(text, None)


def test_committed_readme_says_how_links_appear():
    text = (NOTEBOOKS / "README.md").read_text()
    if course.links_available(course.repository_url()):
        assert "[colab](" in text
    else:
        assert "No Colab / nbviewer links" in text and "[project.urls] Repository" in text
        assert not any("**Open:**" in p.read_text() for p in SOURCES)


@pytest.mark.parametrize("source, figure", [
    ("fig, ax = plotting.subplots()", True),
    ("fig = M.plot_small(runs, a, b)", True),
    ("experiments.show_committed_figure('spec_rl')", True),
    ("E.show_figures(res, OUT)", True),
    ("slide = plotting.slide_figure(fig, 0)", True),
    ("plotting.interactive(draw, a=(0, 1))", True),
    ("display(fig)", True),
    ("res = E.run('x', out_dir=OUT)\nplt.close('all')", False),
    ("plotting.save_figure(slide, 'name', OUT)", False),
    ("# fig = M.plot_small(runs)\nx = 1", False),
    ("rows = experiments.committed_claims('fp8')", False),
])
def test_one_definition_of_a_figure_cell(source, figure):
    assert course.makes_figure(source) is figure
