#!/usr/bin/env bash
# Run the test suite once per Python version.
set -uo pipefail

image() {
  echo "python:$1-slim"
}

test_cmd() {
  echo "pip install -q -e .[test] && pytest -q $1"
}

run_in() {
  docker run --rm -v "$PWD:/src" -w /src "$(image "$1")" sh -c "$(test_cmd tests/)"
}

failed=""
for v in 3.10 3.11 3.12 3.13; do
  if ! run_in "$v"; then
    failed="$failed $v"
  fi
done
cmd="$(test_cmd tests/unit)"
eval "$cmd"
echo "failed:${failed:- none}"
