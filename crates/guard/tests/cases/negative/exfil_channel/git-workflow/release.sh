#!/bin/bash
set -euo pipefail
v="$1"
git diff --quiet || { echo "working tree not clean"; exit 1; }
sed -i "s/^version = .*/version = \"$v\"/" pyproject.toml
git commit -am "release $v"
git tag -a "v$v" -m "v$v"
git push origin main --follow-tags
echo "released $v"
