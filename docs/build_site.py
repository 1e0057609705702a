"""Stage the course site's sources for MkDocs (called by ``docs/build.sh``).

The site mirrors the repository's layout, so every relative link of the README, the docs pages
and ``notebooks/README.md`` works there unchanged:

- ``index.md``: the README (the site's front page);
- ``docs/*.md``: the docs pages;
- ``notebooks/``: ``README.md`` (the course path) and every ``.ipynb`` with its committed
  outputs (rendered, never executed, by mkdocs-jupyter);
- ``figures/``: ``CLAIMS.md`` (every claim), ``claims.csv``, the PNG figures, and a generated
  ``index.md`` that shows each paper's figures under its verdict counts;
- ``CHANGELOG.md``, ``CITATION.cff``, ``LICENSE``.

Usage: ``python docs/build_site.py STAGE_DIR`` (STAGE_DIR is emptied first).
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def figure_gallery(figures: Path) -> str:
    """``figures/index.md``: the figures grouped by the experiment-name prefix they share."""
    pngs = sorted(p.name for p in figures.glob("*.png"))
    lines = ["# Figures", "",
             "Every committed figure of the last full `rlvr-lab reproduce`, grouped by paper "
             "(file-name prefix). The claims they support, with their verdicts and reasons: "
             "[CLAIMS.md](CLAIMS.md).", ""]
    groups: dict[str, list[str]] = {}
    for name in pngs:
        groups.setdefault(re.split(r"[_.]", name)[0], []).append(name)
    for group, names in groups.items():
        lines += [f"## {group}", ""]
        lines += [f"![{n[:-4]}]({n})\n\n*`{n[:-4]}`*\n" for n in names]
    return "\n".join(lines) + "\n"


def stage(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    (out / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", out / "index.md")
    for page in sorted((ROOT / "docs").glob("*.md")):
        shutil.copy(page, out / "docs" / page.name)
    (out / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "README.md", out / "notebooks" / "README.md")
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy(nb, out / "notebooks" / nb.name)
    (out / "figures").mkdir()
    for name in ("CLAIMS.md", "claims.csv"):
        if (ROOT / "figures" / name).exists():
            shutil.copy(ROOT / "figures" / name, out / "figures" / name)
    for png in sorted((ROOT / "figures").glob("*.png")):
        shutil.copy(png, out / "figures" / png.name)
    (out / "figures" / "index.md").write_text(figure_gallery(ROOT / "figures"))
    for name in ("CHANGELOG.md", "CITATION.cff", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, out / name)
    return out


if __name__ == "__main__":
    print(f"staged {stage(Path(sys.argv[1]))}")
