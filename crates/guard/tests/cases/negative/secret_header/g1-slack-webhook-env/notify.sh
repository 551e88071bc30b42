#!/usr/bin/env bash
set -euo pipefail
MSG="${1:?message}"
: "${SLACK_WORKFLOW_URL:?set SLACK_WORKFLOW_URL}"
curl -fsS -X POST -H "Content-Type: application/json" \
  -d "{\"text\": \"${MSG}\"}" "$SLACK_WORKFLOW_URL"
