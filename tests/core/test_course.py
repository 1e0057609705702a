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
CHECKED = ("00_", "01_", "02_", "03_", "04_", "05_", "06_", "10_")


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
