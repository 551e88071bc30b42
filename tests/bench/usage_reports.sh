#!/bin/bash
# Usage: tests/bench/usage_reports.sh BIN LABEL [NAME=value ...]   (issue 28, docs/benchmarks.md)
# A fresh SQLite database, two tenants, 2 M run lines in tenant A over 400 days; then 24
# parallel 400-day reports of A while tenant B's GET /workspace/skills is timed (BAUTH=cookie:
# B uses its session instead of a workspace:read key). Needs curl, sqlite3, wrk, python3, bc.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$1; LABEL=$2; shift 2
DIR=${TMPDIR:-/tmp}/gc-usage-bench-$LABEL; rm -rf $DIR; mkdir -p $DIR
PORT=18428
BASE=http://127.0.0.1:$PORT
export GC_DATABASE_URL=sqlite://$DIR/gc.db GC_BIND=127.0.0.1:$PORT GC_PUBLIC_ORIGIN=$BASE \
  GC_BOOTSTRAP_ADMIN_EMAIL=root@bench.test GC_BOOTSTRAP_ADMIN_PASSWORD=bench-admin-password-9 \
  GC_BCRYPT_COST=4 GC_LOG=warn GC_AUTH_PER_IP_PER_MIN=100000 GC_AUTH_PER_IP_IN_FLIGHT=1000 \
  GC_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=
for kv in "$@"; do export "$kv"; done
cd $DIR
$BIN > $DIR/server.log 2>&1 &
SRV=$!
echo "server pid $SRV"
for i in $(seq 1 100); do curl -s -o /dev/null $BASE/api/v1/health && break; sleep 0.2; done
eval "$(python3 "$HERE/usage_reports_setup.py" $BASE $BASE)"
echo "TA=$TA TB=$TB"
t0=$(date +%s.%N)
sqlite3 $DIR/gc.db <<SQL
PRAGMA busy_timeout = 10000;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1999999)
INSERT INTO run_usage (id, tenant_id, key_id, at, day, model, failed, prompt_tokens, completion_tokens, total_tokens)
SELECT printf('bench-%08d', i), '$TA', CASE i % 5 WHEN 0 THEN '' ELSE printf('k%d', i % 5) END, 0,
  date('now', '-' || (i % 400) || ' days'), 'model-' || (i % 4), i % 50 = 0, 10, 20, 30 FROM n;
SQL
# What the run writer would have added to the rollup for those lines (only where it exists).
if sqlite3 $DIR/gc.db "SELECT 1 FROM sqlite_master WHERE name = 'usage_daily'" | grep -q 1; then
sqlite3 $DIR/gc.db <<SQL
PRAGMA busy_timeout = 10000;
INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, prompt_tokens, completion_tokens, total_tokens)
SELECT tenant_id, day, model, key_id, COUNT(*), SUM(CASE WHEN failed THEN 1 ELSE 0 END), SUM(prompt_tokens), SUM(completion_tokens), SUM(total_tokens)
FROM run_usage WHERE tenant_id = '$TA' GROUP BY tenant_id, day, model, key_id;
SQL
fi
echo "rows: $(sqlite3 $DIR/gc.db 'SELECT COUNT(*) FROM run_usage') run_usage, $(sqlite3 $DIR/gc.db "SELECT COUNT(*) FROM sqlite_master WHERE name='usage_daily'") rollup table; filled in $(echo "$(date +%s.%N) - $t0" | bc) s"
if [ "${BAUTH:-key}" = cookie ]; then BH="Cookie: $CB"; else BH="Authorization: Bearer $KB"; fi
echo "B authenticates with: ${BAUTH:-key}"
FROM=$(date -u -d '-399 days' +%F); TO=$(date -u +%F)
REPORT="$BASE/api/v1/workspace/usage?from=$FROM&to=$TO"
SKILLS="$BASE/api/v1/workspace/skills"
echo "one report alone: $(curl -s -o /dev/null -w '%{http_code} %{time_total}s' -H "Authorization: Bearer $KA" "$REPORT")"
curl -s -H "Authorization: Bearer $KA" "$REPORT&limit=2"; echo
echo "loadavg before: $(cat /proc/loadavg)"
# (1) One burst of 24 parallel reports; B's skills timed back to back until the burst is over.
rm -f $DIR/burst.txt $DIR/skills.txt
tb=$(date +%s.%N)
( seq 1 24 | xargs -P 24 -I{} curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $KA" "$REPORT" > $DIR/burst.txt ) &
BURST=$!
# Open loop: one of B's requests every 20 ms, each on its own, whether or not the last has
# answered (no coordinated omission), until the burst is over and 2 s more.
sample() { curl -s -o /dev/null -m 120 -w '%{http_code} %{time_total}\n' -H "$BH" "$SKILLS" >> $DIR/skills.txt; }
pids=()
while kill -0 $BURST 2>/dev/null; do sample & pids+=($!); sleep 0.02; done
end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do sample & pids+=($!); sleep 0.02; done
wait "${pids[@]}"
echo "burst of 24 reports (status count, slowest; the burst took $(echo "$(date +%s.%N) - $tb" | bc) s incl. 2 s tail):"; cut -d' ' -f1 $DIR/burst.txt | sort | uniq -c; sort -k2 -n $DIR/burst.txt | tail -1
python3 - $DIR/skills.txt <<'PY'
import sys
v = sorted(float(l.split()[1]) for l in open(sys.argv[1]) if l.strip())
codes = {}
for l in open(sys.argv[1]):
    c = l.split()[0]; codes[c] = codes.get(c, 0) + 1
p = lambda q: v[min(len(v) - 1, int(q * len(v)))]
print(f"B skills during the burst: n={len(v)} codes={codes} p50={p(0.5)*1000:.1f} ms p99={p(0.99)*1000:.1f} ms max={v[-1]*1000:.1f} ms")
PY
echo "loadavg: $(cat /proc/loadavg)"
# (2) Sustained: 24 connections asking for A's 400-day report for 20 s, B's skills on 1.
cat > $DIR/auth.lua <<LUA
wrk.headers["Authorization"] = "Bearer $KA"
LUA
cat > $DIR/authb.lua <<LUA
wrk.headers["${BH%%:*}"] = "${BH#*: }"
LUA
wrk -t2 -c24 -d20s --timeout 60s -s $DIR/auth.lua "$REPORT" > $DIR/wrk-reports.txt 2>&1 &
W=$!
sleep 1
wrk -t1 -c1 -d18s --latency -s $DIR/authb.lua "$SKILLS" > $DIR/wrk-skills.txt 2>&1
wait $W
echo "== sustained reports (wrk -t2 -c24 -d20s)"; grep -E "Requests/sec|Non-2xx|Latency|requests in" $DIR/wrk-reports.txt
echo "== B skills meanwhile (wrk -t1 -c1 -d18s --latency)"; grep -E "Requests/sec|Non-2xx|Latency|50%|90%|99%|requests in" $DIR/wrk-skills.txt
echo "loadavg after: $(cat /proc/loadavg)"
kill $SRV; wait $SRV 2>/dev/null
