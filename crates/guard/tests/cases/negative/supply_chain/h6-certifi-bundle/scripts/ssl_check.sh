#!/usr/bin/env bash
set -uo pipefail
host="${1:?host}"
bundle=$(python3 -m certifi)
echo "certifi bundle: $bundle"
echo | openssl s_client -connect "$host:443" -servername "$host" 2>/dev/null |
  openssl x509 -noout -issuer -subject -dates
REQUESTS_CA_BUNDLE="$bundle" python3 - "$host" <<'PY'
import sys, requests
r = requests.get(f"https://{sys.argv[1]}", timeout=10)
print("status", r.status_code)
PY
git config --get http.sslVerify || echo "git verifies TLS (default)"
