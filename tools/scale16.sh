#!/usr/bin/env bash
# Issue 35's many-core table in one command: YCSB read-/write-heavy (100k rows), TPC-B (scale =
# threads) and the noop driver at 1, 2, 4, 8, 16 threads on inplace and wal (the mem reference
# engine at 1 and 16); PMDK pmemobj at one thread; group, cow and lsm read-heavy at 1, 8, 16 (lsm
# with and without group commit, and write-heavy); TPC-B with plain reads of its balances, and at
# a fixed scale of 16, at 1 and 16; the distributed logs beside the central one at 16 threads
# (Wang & Johnson's TATP Update-Location and TPC-B). Most important first: the time budget stops
# new runs.
# Durable commits on `shm` (real clwb/clflushopt on a /dev/shm file), release build, 2 s after a
# 0.5 s warm-up, every checker on. Repetition 1 of every row first, then repetition 2 of the
# scaling rows and the logs while the time budget lasts, so a run cut short still has one whole
# table. Writes OUT/rows.jsonl (each bench --json row with its label and repetition) and
# OUT/log.txt ("rep label: tps aborted load").
#
# Usage: [BEFORE=OLD_NVMDB] tools/scale16.sh NVMDB OUT [secs=2] [budget_s=400] [threads="1 2 4 8 16"]
# With BEFORE, the older binary runs the issue's configurations beside the new one at one thread
# and the most (labels "before ..."). With PLAN=check, the open decisions (TPC-B's read for
# update, cow's pipelined commits, inplace's slot hints against PMDK) interleaved, and with PERF=perf
# flat profiles of the curves that do not scale (OUT/profiles.txt).
# Summarise: python3 tools/scale16_table.py OUT/rows.jsonl
set -u
BIN=$1; OUT=$2; D=${3:-2}; BUDGET=${4:-400}; THREADS=${5:-"1 2 4 8 16"}
mkdir -p "$OUT"
START=$(date +%s)
MAXT=$(echo "$THREADS" | tr ' ' '\n' | sort -n | tail -1)
log() { echo "$*" | tee -a "$OUT/log.txt"; }
{
  echo "## machine"; nproc; lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA node\(s\)|^Flags' | sed 's/^Flags:.*/flags: '"$(grep -o -w -E 'clwb|clflushopt' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/'
  free -g | head -2; df -h /dev/shm /tmp | cat; uptime
} > "$OUT/machine.txt" 2>&1
# Regions live in /dev/shm (the bench default). A container's /dev/shm can be 64 MiB: grow it, or
# say so and use a file under /tmp (the page cache, flushed by the same instructions).
MEDIUM=(--medium shm)
avail=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
if [ "${avail:-0}" -lt 16000000 ]; then
  mount -o remount,size=48g /dev/shm 2>/dev/null
  avail=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
  if [ "${avail:-0}" -lt 16000000 ]; then
    mkdir -p /tmp/nvmdb-regions; MEDIUM=(--medium file --path /tmp/nvmdb-regions/r.region)
  fi
fi
log "# medium: ${MEDIUM[*]} (/dev/shm avail ${avail} KiB)"

run() { # rep label engine workload threads extra...
  local rep=$1 label=$2 e=$3 w=$4 t=$5; shift 5
  local now; now=$(date +%s)
  if [ $((now - START)) -ge "$BUDGET" ]; then log "$rep $label: skipped (budget)"; return; fi
  local med=("${MEDIUM[@]}")
  case $e in noop|mem|pmemobj) med=();; esac
  local row
  row=$("$BIN" bench --engine "$e" --workload "$w" --threads "$t" --duration "$D" --warmup 0.5 \
        --json "${med[@]}" "$@" 2>"$OUT/err.tmp")
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  if [ -z "$row" ]; then
    log "$rep $label: FAILED $(tail -1 "$OUT/err.tmp")"
    rm -f /tmp/nvmdb-regions/r.region
    return
  fi
  echo "$row" | python3 -c '
import json, sys
r = json.load(sys.stdin)
r["label"], r["rep"], r["load1"] = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for k in ("per_worker", "latency_us"):
    r.pop(k, None)
print(json.dumps(r))' "$label" "$rep" "$load" >> "$OUT/rows.jsonl"
  log "$rep $label: $(echo "$row" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(int(r["tps"]), r["aborted"], r["checker"])') load $load at $(( $(date +%s) - START )) s"
  rm -f /tmp/nvmdb-regions/r.region
}

scaling() { # rep
  for t in $THREADS; do
    run "$1" "inplace ycsb-read-heavy t=$t" inplace ycsb "$t" --mix read-heavy --records 100000
    run "$1" "inplace ycsb-write-heavy t=$t" inplace ycsb "$t" --mix write-heavy --records 100000
    run "$1" "inplace tpcb t=$t" inplace tpcb "$t" --scale "$t"
    run "$1" "wal tpcb t=$t" wal tpcb "$t" --scale "$t"
    run "$1" "wal ycsb-write-heavy t=$t" wal ycsb "$t" --mix write-heavy --records 100000
    run "$1" "noop ycsb-read-heavy t=$t" noop ycsb "$t" --mix read-heavy --records 100000
    if [ "$t" = 1 ] || [ "$t" = "$MAXT" ]; then
      run "$1" "mem ycsb-read-heavy t=$t" mem ycsb "$t" --mix read-heavy --records 100000
      before "$1" "$t"
    fi
  done
}
# An older binary (BEFORE=path) beside the new one at one thread and the most, in the same
# sitting: the issue's own configurations (its wal rows with a 2 GiB region, which old binaries
# needed to load TPC-B at scale 16).
before() { # rep threads
  [ -n "${BEFORE:-}" ] || return 0
  local t=$2 keep=$BIN
  BIN=$BEFORE
  run "$1" "before inplace ycsb-read-heavy t=$t" inplace ycsb "$t" --mix read-heavy --records 100000
  run "$1" "before inplace ycsb-write-heavy t=$t" inplace ycsb "$t" --mix write-heavy --records 100000
  run "$1" "before inplace tpcb t=$t" inplace tpcb "$t" --scale "$t"
  run "$1" "before wal tpcb t=$t" wal tpcb "$t" --scale "$t" --size 2GiB
  run "$1" "before noop ycsb-read-heavy t=$t" noop ycsb "$t" --mix read-heavy --records 100000
  BIN=$keep
}
# TPC-B with plain reads of its balances (the default reads them for update since 831bdc7, so the
# scaling rows above are the locked reads), and TPC-B at a fixed scale (the scale = threads rows
# also grow wal's checkpoint work with the threads).
tpcb_variants() { # rep
  for t in 1 "$MAXT"; do
    run "$1" "inplace tpcb-plain-read t=$t" inplace tpcb "$t" --scale "$t" --workload-opt for_update=false
    run "$1" "inplace tpcb-scale16 t=$t" inplace tpcb "$t" --scale 16
    run "$1" "wal tpcb-scale16 t=$t" wal tpcb "$t" --scale 16
  done
}
others() { # rep
  for t in 1 8 "$MAXT"; do
    for e in group cow lsm; do
      run "$1" "$e ycsb-read-heavy t=$t" "$e" ycsb "$t" --mix read-heavy --records 100000
    done
    [ "$t" = 1 ] && continue
    # lsm one commit at a time under the latch (group commit is the default: docs/scaling.md).
    run "$1" "lsm-latch ycsb-read-heavy t=$t" lsm ycsb "$t" --mix read-heavy --records 100000 --engine-opt group_commit=off
    run "$1" "lsm ycsb-write-heavy t=$t" lsm ycsb "$t" --mix write-heavy --records 100000
    run "$1" "lsm-latch ycsb-write-heavy t=$t" lsm ycsb "$t" --mix write-heavy --records 100000 --engine-opt group_commit=off
  done
}
logs() { # rep: Wang & Johnson's variants at the most threads, 4 logs
  local t=$MAXT
  for wl in tatp tpcb; do
    local wa=(--txn update-location --scale 10); [ "$wl" = tpcb ] && wa=(--scale "$t")
    run "$1" "Aether $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --max-pending 262144 --engine-opt log=central
    run "$1" "TX-V $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --engine-opt log=txn:4 --engine-opt cache=volatile
    run "$1" "PG-V $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --engine-opt log=page:4 --engine-opt cache=volatile
    run "$1" "Aether-D $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --max-pending 262144 --engine-opt log=central --eadr
    run "$1" "TX-D $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --engine-opt log=txn:4 --engine-opt cache=durable --eadr
    run "$1" "PG-D $wl t=$t" wal "$wl" "$t" "${wa[@]}" --size 2GiB --engine-opt log=page:4 --engine-opt cache=durable --eadr
  done
}
peers() { # rep: PMDK at one thread (PMEM_IS_PMEM_FORCE=1: flush instructions, as on pmem)
  export PMEM_IS_PMEM_FORCE=1
  run "$1" "pmemobj ycsb-read-heavy t=1" pmemobj ycsb 1 --mix read-heavy --records 100000
  run "$1" "pmemobj ycsb-write-heavy t=1" pmemobj ycsb 1 --mix write-heavy --records 100000
  run "$1" "pmemobj tpcb t=1" pmemobj tpcb 1 --scale 1
  unset PMEM_IS_PMEM_FORCE
}

# PLAN=check: the decisions the table left open, each pair interleaved, then (PERF=path to a
# perf binary) flat profiles of the curves that do not scale.
check() { # rep
  for t in 1 "$MAXT"; do
    run "$1" "inplace tpcb t=$t" inplace tpcb "$t" --scale "$t"
    run "$1" "inplace tpcb-plain-read t=$t" inplace tpcb "$t" --scale "$t" --workload-opt for_update=false
    run "$1" "wal tpcb t=$t" wal tpcb "$t" --scale "$t"
  done
  # TPC-B's history row after the branch (the order before 2026-11-29) beside clause 1.2's.
  run "$1" "inplace tpcb-history-last t=$MAXT" inplace tpcb "$MAXT" --scale "$MAXT" --workload-opt history_last=true
  run "$1" "wal tpcb-history-last t=$MAXT" wal tpcb "$MAXT" --scale "$MAXT" --workload-opt history_last=true
  # Wait-die retries that keep the age they died with (off by default until measured here).
  run "$1" "inplace tpcb-keep-age t=$MAXT" inplace tpcb "$MAXT" --scale "$MAXT" --engine-opt retry_keeps_age=on
  run "$1" "wal tpcb-keep-age t=$MAXT" wal tpcb "$MAXT" --scale "$MAXT" --engine-opt retry_keeps_age=on
  run "$1" "wal ycsb-write-heavy t=$MAXT" wal ycsb "$MAXT" --mix write-heavy --records 100000
  run "$1" "wal ycsb-write-heavy-keep-age t=$MAXT" wal ycsb "$MAXT" --mix write-heavy --records 100000 --engine-opt retry_keeps_age=on
  # cow's pipelined commits (the default since 2026-11-29) against the slot held to durability
  # (lsm's group commit, decided by the 2026-11-28 rounds, is the default: docs/scaling.md).
  for t in 1 8 "$MAXT"; do
    for m in read-heavy write-heavy; do
      run "$1" "cow ycsb-$m t=$t" cow ycsb "$t" --mix $m --records 100000
      run "$1" "cow-slot-held ycsb-$m t=$t" cow ycsb "$t" --mix $m --records 100000 --engine-opt pipeline=off
    done
  done
  for m in read-heavy write-heavy; do
    run "$1" "inplace ycsb-$m t=1" inplace ycsb 1 --mix $m --records 100000
    run "$1" "inplace-hints ycsb-$m t=1" inplace ycsb 1 --mix $m --records 100000 --engine-opt index_hints=on
    PMEM_IS_PMEM_FORCE=1 run "$1" "pmemobj ycsb-$m t=1" pmemobj ycsb 1 --mix $m --records 100000
  done
  run "$1" "inplace-hints tpcb t=1" inplace tpcb 1 --scale 1 --engine-opt index_hints=on
  PMEM_IS_PMEM_FORCE=1 run "$1" "pmemobj tpcb t=1" pmemobj tpcb 1 --scale 1
}
profile() { # label engine workload threads extra...
  [ -n "${PERF:-}" ] || return 0
  local label=$1 e=$2 w=$3 t=$4; shift 4
  if [ $(( $(date +%s) - START )) -ge "$BUDGET" ]; then log "profile $label: skipped (budget)"; return; fi
  "$PERF" record -F 499 -o /tmp/perf.data -- "$BIN" bench --engine "$e" --workload "$w" \
    --threads "$t" --duration 3 --warmup 0.5 "${MEDIUM[@]}" "$@" > /dev/null 2>"$OUT/err.tmp" \
    || { log "profile $label: FAILED $(tail -1 "$OUT/err.tmp")"; return; }
  { echo "## $label (flat, self time; the whole process: load, 0.5 s warm-up, 3 s measured)"
    "$PERF" report -i /tmp/perf.data --stdio --no-children --sort symbol --percent-limit 0.8 \
      2>/dev/null | grep -v '^#' | grep -v '^$' | sed 's/  *- *- *$//' | head -40; } >> "$OUT/profiles.txt"
  log "profile $label: done at $(( $(date +%s) - START )) s"
  rm -f /tmp/nvmdb-regions/r.region
}
profiles() {
  profile "wal tpcb t=$MAXT" wal tpcb "$MAXT" --scale "$MAXT"
  profile "wal ycsb-write-heavy t=$MAXT" wal ycsb "$MAXT" --mix write-heavy --records 100000
  profile "inplace tpcb t=$MAXT" inplace tpcb "$MAXT" --scale "$MAXT"
  profile "cow ycsb-read-heavy t=$MAXT" cow ycsb "$MAXT" --mix read-heavy --records 100000
}

uptime | tee -a "$OUT/log.txt"
if [ "${PLAN:-table}" = check ]; then
  check 1; profiles; check 2; check 3
  uptime | tee -a "$OUT/log.txt"
  log "# elapsed $(( $(date +%s) - START )) s"
  exit 0
fi
scaling 1; peers 1; others 1; tpcb_variants 1; logs 1
scaling 2; peers 2; tpcb_variants 2; others 2; logs 2
uptime | tee -a "$OUT/log.txt"
log "# elapsed $(( $(date +%s) - START )) s"
