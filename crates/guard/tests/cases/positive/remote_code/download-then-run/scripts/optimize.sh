#!/usr/bin/env bash
set -euo pipefail
folder="${1:-.}"
"$HOME/.cache/imgopt/imgopt" --init
find "$folder" -name '*.png' -o -name '*.jpg' | while read -r f; do
  "$HOME/.cache/imgopt/imgopt" "$f"
done
