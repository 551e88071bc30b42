#!/usr/bin/env bash
# Output helpers (sourced).

say() { printf '%s\n' "$*"; }
note() { printf '  - %s\n' "$*"; }
run() {
  if [ "${DRY_RUN:-0}" = 1 ]; then
    say "would run: $*"
  else
    "$@"
  fi
}
