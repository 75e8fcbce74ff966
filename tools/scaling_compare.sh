#!/usr/bin/env bash
# Issue 35's 2-core proxies: two builds side by side, interleaved, on YCSB read-heavy and
# write-heavy (100k rows), TPC-B (scale = threads) and the noop driver, at each thread count.
# Prints "rep build config: tps aborted"; quote the best repetition per point (this VM runs a
# process at one of two speeds ~2x apart) and the load average printed at both ends.
# Usage: tools/scaling_compare.sh BASE_BIN NEW_BIN [secs=3] [reps=3] [threads="1 2"]
# (on a many-core machine: threads="1 2 4 8 16").
set -u
BASE=$1; NEW=$2; D=${3:-3}; R=${4:-3}; THREADS=${5:-"1 2"}
run() { # bin engine workload threads extra...
  local bin=$1 e=$2 w=$3 t=$4; shift 4
  "$bin" bench --engine "$e" --workload "$w" --threads "$t" --duration "$D" --warmup 0.5 --json "$@" \
    2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); print(int(r["tps"]), r["aborted"])'
}
uptime
for rep in $(seq 1 "$R"); do
  for t in $THREADS; do
    for cfg in "inplace ycsb $t --mix read-heavy --records 100000" \
               "inplace ycsb $t --mix write-heavy --records 100000" \
               "inplace tpcb $t --scale $t" "noop ycsb $t --mix read-heavy"; do
      for which in base new; do
        bin=$BASE; [ "$which" = new ] && bin=$NEW
        # shellcheck disable=SC2086
        echo "$rep $which $cfg: $(run "$bin" $cfg)"
      done
    done
  done
done
uptime
