#!/usr/bin/env bash
set -euo pipefail
dest="${KUBECONFIG_PATH:-./kubeconfig}"
if [ -z "${KUBE_CONFIG_B64:-}" ]; then
  echo "KUBE_CONFIG_B64 is not set" >&2
  exit 1
fi
printf '%s' "$KUBE_CONFIG_B64" | base64 -d > "$dest"
chmod 600 "$dest"
kubectl --kubeconfig "$dest" version --client
echo "wrote $dest"
