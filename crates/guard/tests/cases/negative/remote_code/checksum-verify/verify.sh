#!/bin/bash
set -euo pipefail
v="$1"
curl -fsSLO "https://github.com/acme/tool/releases/download/v$v/tool-$v.tar.gz"
curl -fsSL "https://github.com/acme/tool/releases/download/v$v/SHA256SUMS" | grep "tool-$v.tar.gz" | sha256sum -c -
cat > NOTES.txt <<EOF
verified tool $v on $(date -u)
EOF
echo "checksum ok"
