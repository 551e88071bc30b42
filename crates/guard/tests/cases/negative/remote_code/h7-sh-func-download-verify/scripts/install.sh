#!/usr/bin/env bash
# Install a pinned protoc into ./tools, verifying its checksum.
set -euo pipefail

VERSION="28.3"
URL="https://github.com/protocolbuffers/protobuf/releases/download/v${VERSION}/protoc-${VERSION}-linux-x86_64.zip"
SHA256="0ad949f04a6a174da83cdcbdb36dee0a4925272a5b6d83f79a6bf9852076d53f"

log() {
  echo "[protoc] $*" >&2
}

fetch() {
  curl -fsSLo "$2" "$1"
}

verify() {
  echo "$1  $2" | sha256sum -c -
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading $VERSION"
fetch "$URL" "$tmp/protoc.zip"
verify "$SHA256" "$tmp/protoc.zip"
mkdir -p tools
unzip -qo "$tmp/protoc.zip" -d tools
log "installed into tools/"
