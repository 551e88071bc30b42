#!/usr/bin/env bash
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"

VERSION="${HUGO_VERSION:-0.139.3}"
ARCH="$(uname -m)"
case "$ARCH" in
  x86_64) ARCH=amd64 ;;
  aarch64|arm64) ARCH=arm64 ;;
  *) die "unsupported architecture $ARCH" ;;
esac
BASE="https://github.com/gohugoio/hugo/releases/download/v${VERSION}"
TARBALL="hugo_extended_${VERSION}_linux-${ARCH}.tar.gz"

step "checking tools"
need curl
need tar
need sha256sum
info "version $VERSION"
info "architecture $ARCH"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

step "downloading $TARBALL"
fetch_to "$BASE/$TARBALL" "$tmp/$TARBALL"
ok "downloaded"
fetch_to "$BASE/hugo_${VERSION}_checksums.txt" "$tmp/checksums.txt"
ok "checksums downloaded"

step "verifying"
(cd "$tmp" && grep " $TARBALL\$" checksums.txt | sha256sum -c -) || die "checksum mismatch"
ok "checksum matches"

step "installing into ./bin"
mkdir -p bin
tar -xzf "$tmp/$TARBALL" -C bin hugo
ok "installed"
info "run ./bin/hugo version"
