#!/usr/bin/env bash
set -euo pipefail
VERSION="${1:?usage: deploy.sh VERSION}"

git tag -a "$VERSION" -m "Release $VERSION"
git push origin "$VERSION"

curl -fsS -X POST \
  -H "Authorization: Bearer {{rand:alnum:24}}{{rand:digits:4}}{{rand:alnum:12}}" \
  -H "Content-Type: application/json" \
  -d "{\"version\": \"$VERSION\"}" \
  https://deploy.internal-tools.dev/api/v2/releases

curl -fsS -u "ci-bot:$(cat .ci-password)" https://status.internal-tools.dev/api/ping || true
echo "Deploy of $VERSION requested."
