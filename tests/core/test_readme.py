"""The README as a new user meets it: short, the quick start first, every local link resolves."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICK_START = (
    'pip install -e . && rlvr-lab reproduce --quick          # main job: all experiments '
    '(small settings), figures + claims',
    'pip install -e ".[test]" && pytest                      # tests (notebooks included, '
    'executed in quick mode)')


def test_readme_is_short_with_the_quick_start_first():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README has {len(lines)} lines (at most 200)"
    head = lines[:40]
    assert any(line.startswith("## Quick start") for line in head)
    for command in QUICK_START:
        assert command in head, f"quick-start command changed or moved: {command}"
    assert any("notebooks/00_quickstart" in line for line in head)


def _local_links(path: Path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
            yield target.split("#", 1)[0]


def test_readme_and_docs_links_resolve():
    pages = [README, ROOT / "notebooks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [f"{p.relative_to(ROOT)} -> {t}" for p in pages for t in _local_links(p)
               if t and not (p.parent / t).exists()]
    assert not missing, missing


def test_every_python_block_of_the_readme_runs(tmp_path, monkeypatch):
    """The README's examples run as written (in a fresh namespace each, from a scratch folder);
    a block that raises fails with the block's first line in the message."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        try:
            exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
        except Exception as err:  # noqa: BLE001 - name the block that failed
            raise AssertionError(f"README block {code.splitlines()[0]!r} raised "
                                 f"{type(err).__name__}: {err}") from err
