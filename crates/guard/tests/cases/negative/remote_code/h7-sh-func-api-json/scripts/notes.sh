#!/usr/bin/env bash
# List pull requests merged since the latest release.
set -euo pipefail

REPO="${1:?owner/repo}"

api() {
  curl -fsS -H "Authorization: Bearer ${GITHUB_TOKEN}" \
    -H "Accept: application/vnd.github+json" \
    "https://api.github.com/repos/${REPO}/$1"
}

latest_tag() {
  api releases/latest | python3 -c 'import json,sys; print(json.load(sys.stdin)["tag_name"])'
}

TAG="$(latest_tag)"
SINCE="$(api "git/refs/tags/${TAG}" | jq -r .object.sha)"
echo "since ${TAG} (${SINCE})"
api "pulls?state=closed&per_page=100" \
  | jq -r '.[] | select(.merged_at != null) | "- \(.title) (#\(.number))"'
