#!/bin/sh
# Install `just` into ~/.local/bin from the project's GitHub releases.
set -eu

REPO="casey/just"
DEST="${DEST:-$HOME/.local/bin}"

say() { printf 'install-just: %s\n' "$1"; }
err() { say "error: $1" >&2; exit 1; }
has() { command -v "$1" >/dev/null 2>&1; }

download() {
  if has curl; then
    curl --proto '=https' --tlsv1.2 -fsSL "$1"
  elif has wget; then
    wget -qO- "$1"
  else
    err "need curl or wget"
  fi
}

latest_tag() {
  download "https://api.github.com/repos/$REPO/releases/latest" |
    sed -n 's/.*"tag_name": *"\([^"]*\)".*/\1/p'
}

target() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo x86_64-unknown-linux-musl ;;
    Linux-aarch64) echo aarch64-unknown-linux-musl ;;
    Darwin-arm64) echo aarch64-apple-darwin ;;
    Darwin-x86_64) echo x86_64-apple-darwin ;;
    *) err "unsupported platform" ;;
  esac
}

has just && { say "already installed: $(just --version)"; exit 0; }
tag="$(latest_tag)"
[ -n "$tag" ] || err "could not read the latest tag"
archive="just-${tag}-$(target).tar.gz"
say "downloading $archive"
mkdir -p "$DEST"
download "https://github.com/$REPO/releases/download/$tag/$archive" | tar -xz -C "$DEST" just
say "installed $("$DEST/just" --version)"
