#!/usr/bin/env bash
set -euo pipefail
out=$(mktemp --suffix=.md)
{
  echo "# Benchmarks $(git rev-parse --short HEAD)"
  echo
  echo '```'
  cargo bench --quiet 2>/dev/null | grep -E 'time:|^[a-z_]+' || true
  echo '```'
} > "$out"
gh gist create --desc "bench $(git rev-parse --short HEAD)" "$out"
rm -f "$out"
