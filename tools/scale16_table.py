#!/usr/bin/env python3
"""Summarise tools/scale16.sh's rows.jsonl as markdown: one row per configuration, throughput
(best repetition, kTPS) at each thread count, the ratio of the most threads to one, the spread of
repetitions and aborted / committed at the most threads; then the engine counters per
transaction at the most threads. Usage: tools/scale16_table.py ROWS.jsonl"""
import json
import sys
from collections import defaultdict

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
failed = [r for r in rows if "tps" not in r]
rows = [r for r in rows if "tps" in r]
by = defaultdict(lambda: defaultdict(list))  # config -> threads -> rows
order = []
for r in rows:
    cfg, _, t = r["label"].rpartition(" t=")
    if cfg not in by:
        order.append(cfg)
    by[cfg][int(t)].append(r)
threads = sorted({t for c in by.values() for t in c})
print("| configuration | " + " | ".join(f"{t} thr" for t in threads)
      + f" | {threads[-1]} ÷ 1 | spread at 1 | spread at {threads[-1]} | aborted ÷ committed at {threads[-1]} | checker |")
print("|---" * (len(threads) + 6) + "|")
for cfg in order:
    cells, best = [], {}
    for t in threads:
        rs = by[cfg].get(t, [])
        if not rs:
            cells.append("–")
            continue
        b = max(rs, key=lambda r: r["tps"])
        best[t] = b
        cells.append(f"{b['tps'] / 1e3:,.0f}k")
    top = max(best) if best else None
    ratio = f"{best[top]['tps'] / best[1]['tps']:.2f}×" if top and 1 in best and top != 1 else "–"
    def spread_of(t):
        rs = by[cfg].get(t, [])
        if len(rs) < 2:
            return f"{len(rs)} run" if rs else "–"
        return f"{max(r['tps'] for r in rs) / min(r['tps'] for r in rs):.2f}× ({len(rs)})"

    spread = spread_of(1) + " | " + (spread_of(top) if top and top != 1 else "–")
    ab = f"{best[top]['aborted'] / max(best[top]['committed'], 1):.3f}" if top else "–"
    checks = sorted({r["checker"] for t in by[cfg] for r in by[cfg][t]})
    print(f"| {cfg} | " + " | ".join(cells) + f" | {ratio} | {spread} | {ab} | {','.join(checks)} |")

print()
print("Engine counters per committed transaction at the most threads (best repetition):")
print()
for cfg in order:
    t = max(by[cfg])
    b = max(by[cfg][t], key=lambda r: r["tps"])
    act = b.get("engine_activity_per_txn") or {}
    keep = {k: v for k, v in act.items() if isinstance(v, (int, float)) and v}
    if keep:
        shown = ", ".join(f"{k} {v:.3g}" for k, v in sorted(keep.items())[:14])
        print(f"- {cfg} t={t}: {shown}")
print()
loads = [r["load1"] for r in rows]
for r in failed:
    print(f"- FAILED rep {r['rep']} {r['label']}: {r.get('error')}")
print(f"{len(rows)} runs; load average (1 min) after each run {min(loads):.1f}–{max(loads):.1f}.")
