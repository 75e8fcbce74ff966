#!/bin/bash
B=${NVMDB:-./target/release/nvmdb}
echo "# $(uptime)"
for lat in 0 1us 3us; do
 for cfg in "inplace-pelley|inplace|protocol=pelley" "inplace-lean|inplace|protocol=lean" "wal-paper|wal|page_flush=paper" "wal-direct|wal|page_flush=direct" "group-20ms|group|batch_period_ms=20"; do
  IFS='|' read name eng opt <<< "$cfg"
  out=$($B bench --engine $eng --engine-opt $opt --workload tpcb --scale 10 --medium dram --size 2GiB --threads 2 --warmup 1s --duration 3s --persist-latency $lat --write-bandwidth 1.5GiB/s --json 2>/dev/null)
  echo "$lat $name $(echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); p=d['per_txn']; print(round(d['tps']), round(p['fences'],2), round(p['lines_flushed'],1), round(d['latency_us']['p95'],1))" 2>&1) load $(cut -d' ' -f1 /proc/loadavg)"
 done
done
echo "# $(uptime)"
