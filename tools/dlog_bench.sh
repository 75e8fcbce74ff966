#!/bin/sh
# Wang & Johnson distributed logging on this machine: central vs txn:2 vs page:2, volatile vs
# durable caches, 1 and 2 threads, on TATP Update-Location, TPC-B and TPC-C Payment. One short run
# each (load average printed beside it: the machine is shared). Usage: [NVMDB=path/to/nvmdb] tools/dlog_bench.sh [secs]
set -u
secs=${1:-5}
bin=${NVMDB:-./target/release/nvmdb}
for w in "tatp --txn update-location" "tpcb" "tpcc --txn payment"; do
  for t in 1 2; do
    for v in "central volatile" "txn:2 volatile" "page:2 volatile" "txn:2 durable" "page:2 durable"; do
      set -- $v
      eadr=""
      [ "$2" = durable ] && eadr="--eadr"
      out=$($bin bench --engine wal --workload $w --threads $t --duration "$secs" --warmup 1 \
        --size 1GiB --engine-opt log=$1 --engine-opt cache=$2 $eadr 2>&1)
      tps=$(echo "$out" | sed -n 's/.*committed *[0-9]* *(\(.*\) txn\/s).*/\1/p')
      nudge=$(echo "$out" | tr ' ' '\n' | grep -A1 '^nudges$' | tail -1)
      nudged=$(echo "$out" | tr ' ' '\n' | grep -A1 '^commits_nudged$' | tail -1)
      load=$(uptime | sed 's/.*load average: //')
      echo "$w | threads $t | log=$1 cache=$2 | ${tps:-FAILED} txn/s | nudges/txn ${nudge:--} | nudged/txn ${nudged:--} | load $load"
      [ -z "$tps" ] && echo "$out" | tail -3
    done
  done
done
