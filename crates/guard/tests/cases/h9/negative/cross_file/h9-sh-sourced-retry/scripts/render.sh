#!/usr/bin/env bash
set -euo pipefail
. "$(dirname "$0")/lib/retry.sh"

pull() {
  helm dependency update ./chart
}

render() {
  helm template "$1" ./chart -f "values/$1.yaml" > "rendered/$1.yaml"
}

mkdir -p rendered
retry_with pull
retry_with git fetch --tags origin
printf '%s\n' api web worker | each_line render
git diff --stat rendered/
