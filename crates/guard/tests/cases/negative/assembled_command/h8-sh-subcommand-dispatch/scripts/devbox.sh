#!/usr/bin/env bash
# Small front-end for the project's Compose stack.
set -euo pipefail

COMPOSE="${COMPOSE:-docker compose}"
PROJECT="${PROJECT_NAME:-devbox}"

usage() {
  echo "usage: devbox.sh <up|down|logs|status>"
}

cmd_up() {
  $COMPOSE -p "$PROJECT" up -d --wait
  cmd_status
}

cmd_down() {
  $COMPOSE -p "$PROJECT" down --remove-orphans
}

cmd_logs() {
  $COMPOSE -p "$PROJECT" logs --tail=200 "${1:-}"
}

cmd_status() {
  $COMPOSE -p "$PROJECT" ps --format 'table {{.Service}}\t{{.State}}\t{{.Ports}}'
}

run() {
  echo "+ $*" >&2
  "$@"
}

sub="${1:-status}"
shift || true
handler="cmd_${sub}"
if ! declare -F "$handler" >/dev/null; then
  usage
  exit 2
fi
run "$handler" "$@"
