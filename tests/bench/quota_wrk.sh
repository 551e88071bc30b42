#!/usr/bin/env bash
# Issue 28 (docs/benchmarks.md): a tenant with a request limit far above its load against an unlimited one, same
# server, wrk -t2 -c16 -d5s, alternating rounds. Usage: tests/bench/quota_wrk.sh <cargo target dir with release gc-server and gc-api-check-fixture> <label>; needs wrk, jq, curl
set -euo pipefail
T=${1:-target}; LABEL=${2:-idle}
D=$(mktemp -d); cd "$D"; mkfifo in; (sleep 100000 > in &)
"$T/release/gc-api-check-fixture" "$T/release/gc-server" < in > fixture.json 2> fixture.err &
for i in $(seq 1 60); do [ -s fixture.json ] && break; sleep 0.5; done
B=$(jq -r .base fixture.json); A=$(jq -r .admin_cookie fixture.json); TID=$(jq -r .tenant_id fixture.json); K=$(jq -r '.keys.run' fixture.json)
cat > run.lua <<LUA
wrk.method = "POST"
wrk.body = '{"model":"auto","messages":[{"role":"user","content":"hello"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $K"
LUA
setlim() { curl -s -o /dev/null -XPATCH "$B/api/v1/admin/tenants/$TID" -H "cookie: gc_session=$A" -H "origin: $B" -H 'content-type: application/json' -d "{\"limits\":{\"requests_per_minute\":$1,\"tokens_per_minute\":null,\"monthly_tokens\":null}}"; }
echo "## $LABEL ($(date -u +%H:%M:%S), loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
echo "| round | limit | req/s | p50 | p99 |"; echo "|---|---|---|---|---|"
for r in 1 2 3; do for lim in null 100000000; do setlim $lim
  out=$(wrk -t2 -c16 -d5s --latency -s run.lua "$B/api/v1/run")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}'); p50=$(echo "$out" | awk '$1=="50%" {print $2}'); p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  echo "| $r | $lim | $rps | $p50 | $p99 |"; done; done
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg); dropped-record warnings: $(grep -c 'dropped' fixture.err || true)"
pkill -f 'sleep 100000' || true; sleep 1; rm -rf "$D"
