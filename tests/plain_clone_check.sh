#!/usr/bin/env bash
# A newcomer's first run: a plain clone of this repository in a temporary folder,
# with no shared/ folder beside it and an empty cache (no benchmark data anywhere),
# then the README's test command.  Exit code: pytest's.
#
#   tests/plain_clone_check.sh            reuse the active Python environment: the clone
#                                         is put first on PYTHONPATH instead of reinstalling
#   tests/plain_clone_check.sh --install  'pip install -e ".[test]"' into a fresh venv
#                                         first (needs the package index)
#
# Clones HEAD of the checkout it lives in (commit first: uncommitted changes are not tested).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone --quiet "$repo" "$tmp/caps2ne_np"
cd "$tmp/caps2ne_np"
echo "plain clone of $(git rev-parse --short HEAD) in $tmp/caps2ne_np (no $tmp/shared)" >&2
unset CAPS2NE_DATA CAPS2NE_DATA_MIRROR
export XDG_CACHE_HOME="$tmp/cache"          # an empty user cache: no data downloaded yet
if [ "${1:-}" = "--install" ]; then
    python -m venv "$tmp/venv"
    # shellcheck disable=SC1091
    source "$tmp/venv/bin/activate"
    pip install --quiet -e ".[test]"
else
    export PYTHONPATH="$tmp/caps2ne_np"
fi
python -c 'import caps2ne_np, sys; print("package:", caps2ne_np.__file__, file=sys.stderr)'
python -m pytest -q
