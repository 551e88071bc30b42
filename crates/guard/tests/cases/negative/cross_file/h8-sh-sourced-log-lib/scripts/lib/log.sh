#!/usr/bin/env bash
# Logging helpers shared by the site's scripts.

_ts() { date +%H:%M:%S; }
_c() { [ -t 2 ] && printf '\033[%sm' "$1" || true; }

log() { echo "$(_c 36)$(_ts)$(_c 0) $*" >&2; }
info() { log "$*"; }
ok() { echo "$(_c 32)ok$(_c 0) $*" >&2; }
warn() { echo "$(_c 33)warn$(_c 0) $*" >&2; }
die() { echo "$(_c 31)error$(_c 0) $*" >&2; exit 1; }
step() { log "==> $*"; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "missing $1"
}

fetch_to() {
  curl -fsSL --retry 3 -o "$2" "$1"
}
