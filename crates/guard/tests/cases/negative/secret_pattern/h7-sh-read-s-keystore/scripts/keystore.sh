#!/usr/bin/env bash
# Create an upload keystore; the password is typed, never stored in the repo.
set -euo pipefail

KS="${1:-upload-keystore.jks}"

ask() {
  local prompt="$1" a b
  while true; do
    read -rs -p "$prompt: " a; echo
    read -rs -p "$prompt (again): " b; echo
    [ "$a" = "$b" ] && [ "${#a}" -ge 8 ] && break
    echo "passwords differ or are shorter than 8 characters" >&2
  done
  printf '%s' "$a"
}

pass="$(ask "Keystore password")"
keytool -genkeypair -v -keystore "$KS" -alias upload \
  -keyalg RSA -keysize 2048 -validity 10000 \
  -storepass "$pass" -dname "CN=Upload, O=Example"
echo "storePassword=(ask the release manager)" > key.properties.example
echo "created $KS"
