#!/usr/bin/env bash
# Build the course site: the README as front page, the docs pages, every notebook with its
# committed outputs (not executed), and the claims with their figures, into docs/_build/html/.
#
#   pip install -e ".[docs]"      # MkDocs, Material theme, mkdocs-jupyter
#   bash docs/build.sh            # then open docs/_build/html/index.html
#
# Internal links are checked: MkDocs runs with --strict, so a link to a missing page or a
# missing anchor fails the build. RLVR_LAB_SITE_DIR overrides the output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${RLVR_LAB_SITE_DIR:-docs/_build/html}"
stage="docs/_build/src"
if ! python -c "import mkdocs, mkdocs_jupyter, material" 2>/dev/null; then
    echo "the course site needs its generator: pip install -e \".[docs]\"" >&2
    exit 3
fi
python docs/build_site.py "$stage"
export NO_MKDOCS_2_WARNING=1
python -m mkdocs build --strict --config-file docs/mkdocs.yml --site-dir "$(realpath -m "$out")"
echo "site in $out/index.html"
