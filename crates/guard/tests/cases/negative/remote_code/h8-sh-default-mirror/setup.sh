#!/usr/bin/env bash
set -euo pipefail

NODE_VERSION="${NODE_VERSION:-20.18.1}"
NODE_MIRROR="${NODE_MIRROR:-https://nodejs.org/dist}"
PYTHON="${PYTHON:-python3}"
PREFIX="${PREFIX:=$PWD/.tools}"

say() { printf '[setup] %s\n' "$*"; }

platform() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo linux-x64 ;;
    Linux-aarch64) echo linux-arm64 ;;
    Darwin-arm64) echo darwin-arm64 ;;
    *) echo unsupported ;;
  esac
}

plat="$(platform)"
[ "$plat" != unsupported ] || { say "unsupported platform"; exit 1; }
name="node-v${NODE_VERSION}-${plat}"
url="${NODE_MIRROR}/v${NODE_VERSION}/${name}.tar.xz"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "downloading $url"
curl -fsSLo "$tmp/node.tar.xz" "$url"
curl -fsSLo "$tmp/SHASUMS256.txt" "${NODE_MIRROR}/v${NODE_VERSION}/SHASUMS256.txt"
(cd "$tmp" && grep " ${name}.tar.xz\$" SHASUMS256.txt | sed "s/${name}.tar.xz/node.tar.xz/" | sha256sum -c -)

mkdir -p "$PREFIX"
tar -xJf "$tmp/node.tar.xz" -C "$PREFIX" --strip-components=1
say "node $("$PREFIX/bin/node" --version)"

"$PYTHON" -m venv .venv
.venv/bin/pip install -q -r requirements.txt
say "venv ready"
