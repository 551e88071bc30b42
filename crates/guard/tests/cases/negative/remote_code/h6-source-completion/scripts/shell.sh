#!/usr/bin/env bash
set -euo pipefail
ctx="${1:?context}"

# Completion and tool hooks come from the local binaries, not the network.
source <(kubectl completion bash)
if command -v direnv >/dev/null; then
  eval "$(direnv hook bash)"
fi
if command -v pyenv >/dev/null; then
  eval "$(pyenv init -)"
fi

kubectl config use-context "$ctx" >/dev/null
ns=$(kubectl config view --minify -o jsonpath='{..namespace}')
echo "context: $ctx  namespace: ${ns:-default}"
kubectl get pods -n "${ns:-default}" -o wide
