#!/usr/bin/env bash
# retry helpers shared by the team's scripts

retry_with() {
  local cb=$1; shift
  local n=0
  until "$cb" "$@"; do
    n=$((n + 1))
    [ "$n" -ge 3 ] && return 1
    sleep $((n * 2))
  done
}

each_line() {
  local cb=$1
  while IFS= read -r line; do "$cb" "$line"; done
}
