#!/usr/bin/env bash
# Small helpers for flaky network steps.

# retry_with FUNC ARGS...: calls FUNC with ARGS up to three times, waiting longer each time.
retry_with() {
  local fn=$1
  shift
  for attempt in 1 2 3; do
    if "$fn" "$@"; then
      return 0
    fi
    echo "attempt $attempt of $fn failed" >&2
    sleep "$attempt"
  done
  return 1
}

# each_line FUNC: calls FUNC once per line of standard input.
each_line() {
  local fn=$1 item
  while IFS= read -r item; do
    "$fn" "$item"
  done
}
