#!/usr/bin/env bash
# Issue 35's central-log proxies on 2 cores: `wal` TPC-B (scale = threads) and YCSB write-heavy
# (100k rows), interleaved, three ways: BASE_BIN (a build of main), NEW_BIN with the old log paths
# (log_insert=aether log_force=inline), NEW_BIN with its defaults (Aether's consolidation array and
# flush pipelining). Prints "rep variant t=T workload: tps aborted forces/txn recs/group p50us
# pend_hw"; quote the best repetition per point and the load average printed at both ends.
# Usage: tools/wal_log_compare.sh BASE_BIN NEW_BIN [secs=3] [reps=3] [threads="1 2 4"]
set -u
BASE=$1; NEW=$2; D=${3:-3}; R=${4:-3}; THREADS=${5:-"1 2 4"}
run() {
  local bin=$1; shift
  "$bin" bench --engine wal --duration "$D" --warmup 0.5 --json "$@" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin); a = r["engine_activity_per_txn"]
groups = a.get("insert_groups", 0)
print(int(r["tps"]), r["aborted"], "forces/txn=%.3f recs/group=%.2f p50us=%s pend_hw=%s" % (
    a.get("log_forces", 0), a.get("insert_grouped_records", 0) / groups if groups else 0,
    r["latency_us"]["p50"], r["pending_high_water"]))'
}
echo "start: $(uptime)"
for rep in $(seq 1 "$R"); do
  for t in $THREADS; do
    for w in "--workload tpcb --scale $t" "--workload ycsb --mix write-heavy --records 100000"; do
      # shellcheck disable=SC2086
      echo "$rep base        t=$t $w: $(run "$BASE" $w --threads "$t")"
      # shellcheck disable=SC2086
      echo "$rep new-oldpath t=$t $w: $(run "$NEW" $w --threads "$t" \
        --engine-opt log_insert=aether --engine-opt log_force=inline)"
      # shellcheck disable=SC2086
      echo "$rep new         t=$t $w: $(run "$NEW" $w --threads "$t")"
    done
  done
done
echo "end: $(uptime)"
