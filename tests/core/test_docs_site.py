"""The course site: `bash docs/build.sh` builds docs/_build/html with MkDocs (--strict, so a
broken internal link fails it). Skipped where the `docs` extra is not installed."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAVE_GENERATOR = all(importlib.util.find_spec(m) is not None
                     for m in ("mkdocs", "mkdocs_jupyter", "material"))


def test_staged_sources_mirror_the_repository(tmp_path):
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "docs" / "build_site.py")
    build_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    out = build_site.stage(tmp_path / "src")
    assert (out / "index.md").read_text() == (ROOT / "README.md").read_text()
    assert (out / "notebooks" / "10_grpo_from_scratch.ipynb").exists()
    assert (out / "docs" / "usage.md").exists() and (out / "figures" / "CLAIMS.md").exists()
    gallery = (out / "figures" / "index.md").read_text()
    assert "![grpo_family_curves](grpo_family_curves.png)" in gallery


def test_every_staged_page_is_in_the_nav():
    text = (ROOT / "docs" / "mkdocs.yml").read_text()
    for page in [*(ROOT / "docs").glob("*.md"), *(ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")]:
        assert f"{page.parent.name}/{page.name}" in text, f"{page.name} missing from mkdocs.yml nav"


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_GENERATOR, reason='needs the docs extra: pip install -e ".[docs]"')
def test_site_builds_with_checked_links(tmp_path):
    env = dict(os.environ, RLVR_LAB_SITE_DIR=str(tmp_path / "html"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run(["bash", "docs/build.sh"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    html = tmp_path / "html"
    for page in ("index.html", "notebooks/index.html", "notebooks/10_grpo_from_scratch.html",
                 "figures/CLAIMS.html", "figures/index.html", "docs/usage.html"):
        assert (html / page).is_file(), page
    assert "<img" in (html / "notebooks" / "02_mc_grpo.html").read_text()  # committed outputs
