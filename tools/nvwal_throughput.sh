#!/bin/bash
B=${NVMDB:-./target/release/nvmdb}
echo "# uptime $(uptime)"
for rep in 1 2; do
for lat in 400ns 1us 2us; do
  for cfg in "sqlite|" "LS|nvwal=ls diff=off heap=per-frame" "LS+Diff|nvwal=ls diff=on heap=per-frame" "UH+LS|nvwal=ls diff=off heap=user" "UH+LS+Diff|nvwal=ls diff=on heap=user" "UH+CS+Diff|nvwal=cs diff=on heap=user" "UH+E+Diff|nvwal=e diff=on heap=user"; do
    name=${cfg%%|*}; opts=${cfg#*|}
    if [ $name = sqlite ]; then
      out=$($B bench --engine sqlite --workload mobibench --duration 2 --warmup 0.5 --json 2>/dev/null | tail -1)
    else
      eo=""; for o in $opts; do eo="$eo --engine-opt $o"; done
      out=$($B bench --engine sqlite-nvwal $eo --workload mobibench --duration 2 --warmup 0.5 --medium dram --size 256MiB --persist-latency $lat --json 2>/dev/null | tail -1)
    fi
    echo "$rep $lat $name $(echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); p=d['per_txn']; print(round(d['tps'],1), p['fences'], p['delay_ns'])")"
  done
done
done
echo "# uptime $(uptime)"
