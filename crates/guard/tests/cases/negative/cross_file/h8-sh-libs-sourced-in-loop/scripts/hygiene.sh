#!/usr/bin/env bash
set -euo pipefail
LIB_DIR="$(cd "$(dirname "$0")" && pwd)/lib"
for lib in "$LIB_DIR"/git.sh "$LIB_DIR"/ui.sh; do
  # shellcheck source=/dev/null
  . "$lib"
done

DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1

base="$(default_branch)"
say "default branch: $base"
git fetch --prune --quiet origin

say "merged branches:"
for b in $(merged_branches "$base"); do
  note "$b"
  run git branch -d "$b"
done

say "stale remote branches:"
stale_remotes | while read -r r; do note "$r"; done
run git remote prune origin
say "done"
