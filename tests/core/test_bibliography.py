"""Bibliography: every experiment's paper has a full reference, ids look like arXiv ids, claim
sources name declared claims, docs/papers.md is the generated text, claims get paper_ref."""
from pathlib import Path

import pytest

from rlvr_lab import bibliography, experiments
from rlvr_lab.bibliography import ARXIV_ID, CLAIM_SOURCES, PAPERS, Paper


def _repo_experiments():
    """Registered experiments defined in the repository's simulations/ (not test dummies)."""
    root = experiments.SIMULATIONS_DIR
    return {n: e for n, e in experiments.registry().items()
            if Path(e.module_file).resolve().is_relative_to(root)}


def test_every_experiment_paper_has_an_entry():
    exps = _repo_experiments()
    assert exps, experiments.LOAD_ERRORS
    missing = {e.paper for e in exps.values()} - set(PAPERS)
    assert not missing, f"add {sorted(missing)} to rlvr_lab/bibliography.py"


def test_arxiv_ids_look_like_arxiv_ids_and_are_unique():
    ids = [p.arxiv for p in PAPERS.values() if p.arxiv]
    assert all(ARXIV_ID.fullmatch(i) for i in ids), ids
    assert len(ids) == len(set(ids))
    for p in PAPERS.values():
        assert p.url == (f"https://arxiv.org/abs/{p.arxiv}" if p.arxiv else "")
        assert p.title in p.reference() and str(p.year) in p.reference()


def test_papers_being_added_are_present():
    assert PAPERS["SAR"].arxiv == "2512.06421"
    assert PAPERS["DynaWeb"].arxiv == "2601.22149"
    assert {"ROLL", "FP8"} <= set(PAPERS)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(arxiv="2402.330"), "arxiv="),
    (dict(arxiv="arXiv:2402.03300"), "arxiv="),
    (dict(year=24), "year="),
    (dict(code="github.com/a/b"), "code="),
    (dict(title=""), "non-empty"),
])
def test_bad_entries_are_rejected(kwargs, needle):
    base = dict(key="X", title="T", authors="A", year=2025, arxiv="2501.00001")
    with pytest.raises(ValueError, match=needle):
        Paper(**{**base, **kwargs})


def test_claim_sources_name_declared_claims_and_known_papers():
    declared = {c for e in _repo_experiments().values() for c in e.claims}
    unknown = set(CLAIM_SOURCES) - declared
    assert not unknown, f"CLAIM_SOURCES names claims no experiment declares: {sorted(unknown)}"
    for claim_id, (key, where) in CLAIM_SOURCES.items():
        assert where, claim_id
        assert key == "" or key in PAPERS, claim_id


def test_paper_ref_format():
    assert bibliography.paper_ref("flip_reduction_g2") == "arXiv:2601.22582 abstract"
    assert bibliography.paper_ref("echo_bound_model") == "derived"
    assert bibliography.paper_ref("no_such_claim") == ""
    with pytest.raises(KeyError, match="known"):
        bibliography.get("NoSuchPaper")


def test_claim_fills_paper_ref_unless_given():
    c = experiments.claim("dars_b_both", "s", 1.0, True, "c")
    assert c.paper_ref == "arXiv:2508.13755 abstract"
    c = experiments.claim("dars_b_both", "s", 1.0, True, "c", paper_ref="Table 1")
    assert c.paper_ref == "Table 1"
    assert experiments.claim("unlisted", "s", 1.0, True, "c").paper_ref == ""


def test_docs_papers_md_is_the_generated_text():
    text = bibliography.docs_path().read_text()
    assert bibliography.replace_block(text, bibliography.markdown()) == text, (
        "docs/papers.md is stale: run `python -m rlvr_lab.bibliography`")
    for p in PAPERS.values():
        assert p.title in text and (not p.arxiv or p.url in text)


def test_replace_block_needs_both_markers_in_order():
    start, end = bibliography.START, bibliography.END
    assert bibliography.replace_block(f"a{start}old{end}b", "new") == f"a{start}\nnew\n\n{end}b"
    with pytest.raises(ValueError):
        bibliography.replace_block(f"{end}x{start}", "new")
    with pytest.raises(ValueError):
        bibliography.replace_block("no markers", "new")
