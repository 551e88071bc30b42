#!/usr/bin/env bash
set -euo pipefail
REPO="${1:?usage: stats.sh OWNER/REPO}"
curl -fsS -H "Authorization: Bearer ${GITHUB_TOKEN}" \
  -H "Accept: application/vnd.github+json" \
  "https://api.github.com/repos/${REPO}" | jq '{stars: .stargazers_count, forks: .forks_count}'
curl -fsS -H "Authorization: token $(gh auth token)" "https://api.github.com/repos/${REPO}/pulls?state=open" | jq length
