#!/usr/bin/env bash
# Ask for the Linear API key, check it, store it in the keychain.
set -euo pipefail

read -rs -p "Paste your Linear API key (input hidden): " LINEAR_API_KEY
echo

viewer() {
  curl -fsS https://api.linear.app/graphql \
    -H "Content-Type: application/json" \
    -H "Authorization: ${LINEAR_API_KEY}" \
    -d '{"query": "{ viewer { name email } }"}'
}

if ! viewer | grep -q '"email"'; then
  echo "That key was not accepted by Linear." >&2
  exit 1
fi

if command -v security >/dev/null 2>&1; then
  security add-generic-password -U -a "$USER" -s linear-api-key -w "$LINEAR_API_KEY"
else
  printf '%s' "$LINEAR_API_KEY" | secret-tool store --label="Linear API key" service linear
fi
echo "Stored."
