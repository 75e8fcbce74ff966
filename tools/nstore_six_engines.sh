#!/bin/bash
# Six engines side by side, one sitting: YCSB (N-Store skew) write-heavy / read-heavy, low / high skew, 0 and 320 ns.
B=${NVMDB:-./target/release/nvmdb}
OUT=${OUT:-six.jsonl}; : > "$OUT"
for lat in 0 320ns; do
 for mix in write-heavy read-heavy; do
  for skew in 0.1 0.5; do
   for e in "inp wal io=fs" "cow cow io=fs" "log lsm io=fs" "nvm-inp inplace -" "nvm-cow cow -" "nvm-log lsm -"; do
     set -- $e; name=$1; eng=$2; opt=$3
     extra=(); [ "$opt" != "-" ] && extra=(--engine-opt "$opt")
     rl=(); [ "$lat" != 0 ] && rl=(--read-latency 160ns)
     out=$($B bench --engine $eng "${extra[@]}" --workload ycsb --mix $mix --records 50000 --distribution nstore-skew --workload-opt skew=$skew --medium shm --path /dev/shm/six.region --size 2GiB --threads 1 --warmup 1s --duration 3s --persist-latency $lat "${rl[@]}" --json 2>err.txt)
     echo "{\"name\":\"$name\",\"lat\":\"$lat\",\"mix\":\"$mix\",\"skew\":\"$skew\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"row\":${out:-null}}" >> "$OUT"
     rm -f /dev/shm/six.region
     [ -z "$out" ] && { echo "$name $lat $mix $skew: $(head -c 300 err.txt)" >> errors.txt; }
   done
  done
 done
done
rm -f err.txt
