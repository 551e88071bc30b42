#!/usr/bin/env bash
set -euo pipefail
poetry source add --priority=explicit pytorch-cpu https://download.pytorch.org/whl/cpu
poetry add --source pytorch-cpu torch torchvision
poetry config --list | grep -E '^(repositories|virtualenvs)' || true
pip config list || true
npm config get registry || true
