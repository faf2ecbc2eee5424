#!/usr/bin/env bash
# A newcomer's first runs: a plain clone of this repository in a temporary folder, with
# no shared/ folder beside it, no data mirror and a fake HOME, then the README's test
# command twice in a row:
#   1. with an empty cache (no benchmark data anywhere): the data tests skip;
#   2. with a cache holding only Cora (what 'train --dataset cora' downloads): the Cora
#      tests run, the others skip.
# After each run the cache must be exactly as it was (the tests write only into their
# temporary folders).  Exit code: 0 when both runs pass and leave the cache untouched.
#
#   tests/plain_clone_check.sh            reuse the active Python environment: the clone
#                                         is put first on PYTHONPATH instead of reinstalling
#   tests/plain_clone_check.sh --install  'pip install -e ".[test]"' into a fresh venv
#                                         first (needs the package index)
#
# Cora for run 2 comes from $CAPS2NE_DATA_MIRROR or ../shared/data when one is there
# (else run 2 is skipped and said so).  PYTEST_ARGS adds pytest options (e.g. -x).
# Clones HEAD of the checkout it lives in (commit first: uncommitted changes are not tested).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cora_from="${CAPS2NE_DATA_MIRROR:-}"
if [ -z "$cora_from" ] && [ -d "$repo/../shared/data/planetoid" ]; then
    cora_from="$(cd "$repo/../shared/data" && pwd)"
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone --quiet "$repo" "$tmp/caps2ne_np"
cd "$tmp/caps2ne_np"
echo "plain clone of $(git rev-parse --short HEAD) in $tmp/caps2ne_np (no $tmp/shared)" >&2
unset CAPS2NE_DATA CAPS2NE_DATA_MIRROR XDG_CACHE_HOME CI
export HOME="$tmp/home"                     # a fake home: its cache is the user's cache
mkdir -p "$HOME"
cache="$HOME/.cache"
if [ "${1:-}" = "--install" ]; then
    python -m venv "$tmp/venv"
    # shellcheck disable=SC1091
    source "$tmp/venv/bin/activate"
    pip install --quiet -e ".[test]"
else
    export PYTHONPATH="$tmp/caps2ne_np"
fi
python -c 'import caps2ne_np, sys; print("package:", caps2ne_np.__file__, file=sys.stderr)'

snapshot() {  # every file below the cache with its size and SHA-256
    (cd "$cache" 2>/dev/null && find . -type f -print0 | sort -z | xargs -0r sha256sum) || true
}

run() {  # run NAME: the README's test command, then check the cache is unchanged
    local before after
    before="$(snapshot)"
    echo "== run $1: cache holds: $(cd "$cache" 2>/dev/null && find . -type f | sort | tr '\n' ' ')" >&2
    # shellcheck disable=SC2086
    python -m pytest -q ${PYTEST_ARGS:-} || { echo "FAIL: run $1: pytest failed" >&2; status=1; }
    after="$(snapshot)"
    if [ "$before" != "$after" ]; then
        echo "FAIL: run $1 changed the user's cache $cache:" >&2
        diff <(echo "$before") <(echo "$after") >&2 || true
        status=1
    fi
    local others
    others="$(find "$HOME" -path "$cache" -prune -o -type f -print)"
    if [ -n "$others" ]; then
        echo "note: files in HOME outside the cache after run $1:" >&2
        echo "$others" >&2
    fi
    [ "$before" != "$after" ] || echo "== run $1: cache unchanged" >&2
}

status=0
mkdir -p "$cache"
run 1-empty-cache
if [ -n "$cora_from" ]; then
    mkdir -p "$cache/caps2ne_np/planetoid"
    for part in ally ty graph test.index allx tx; do
        cp "$cora_from/planetoid/ind.cora.$part" "$cache/caps2ne_np/planetoid/"
    done
    run 2-cora-only
else
    echo "== run 2 skipped: no Cora to put in the cache (set CAPS2NE_DATA_MIRROR)" >&2
fi
exit "$status"
