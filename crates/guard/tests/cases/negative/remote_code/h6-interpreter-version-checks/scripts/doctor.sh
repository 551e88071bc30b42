#!/bin/sh
# Prints the versions of the tools this project needs.
set -u
need_py="3.11"
need_node="20"

py=$(python3 -c "import sys; print('%d.%d' % sys.version_info[:2])" 2>/dev/null || echo none)
node=$(node -e "console.log(process.versions.node.split('.')[0])" 2>/dev/null || echo none)
pipv=$(python3 -m pip --version 2>/dev/null | awk '{print $2}')
ssl=$(python3 -c "import ssl; print(ssl.OPENSSL_VERSION)" 2>/dev/null)

echo "python: $py (need >= $need_py)"
echo "node:   $node (need >= $need_node)"
echo "pip:    ${pipv:-none}"
echo "openssl: ${ssl:-unknown}"
perl -e 'print "perl ok\n"' 2>/dev/null || true
