#!/usr/bin/env bash
set -euo pipefail

function have {
  command -v "$1" >/dev/null 2>&1
}

function install_rustup {
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
}

if ! have rustup; then
  install_rustup
  . "$HOME/.cargo/env"
fi
rustup component add clippy rustfmt
cargo --version
