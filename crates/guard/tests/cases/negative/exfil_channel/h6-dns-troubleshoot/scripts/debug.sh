#!/usr/bin/env bash
set -uo pipefail
domain="${1:?domain}"
resolvers=(1.1.1.1 8.8.8.8 9.9.9.9)

echo "== system resolver"
cat /etc/resolv.conf | grep -v '^#'
nslookup "$domain" || true

for r in "${resolvers[@]}"; do
  echo "== $r"
  dig +short @"$r" "$domain" A
  dig +short @"$r" "$domain" AAAA
  dig +short @"$r" "www.$domain" CNAME
done

echo "== authoritative"
ns=$(dig +short NS "$domain" | head -1)
[ -n "$ns" ] && dig +norecurse @"$ns" "$domain" SOA
host -t MX "$domain" || true
