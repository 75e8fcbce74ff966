#!/usr/bin/env python3
"""Summarise N-Store sweep rows per point, for the `why` fields of experiments/nstore-*.toml.

Usage: nstore_why.py RESULTS.jsonl [SPEC]

For each (spec, engine, setting) point prints the fastest repetition (the report's rule) and the
spread over repetitions: tps, µs per transaction (threads ÷ tps), the modelled delay and its fs part
(syncs × fs_sync_ns + bytes ÷ bandwidth), bytes written and by whom (engine_activity_per_txn).
Arithmetic from the rows only; nothing is rerun.
"""
import collections
import json
import sys


def key(r):
    g = dict(r["grid"])
    eng = g.pop("engine", r["engine"])
    return r["spec"], eng, ",".join(f"{k}={v}" for k, v in sorted(g.items()))


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    want = sys.argv[2] if len(sys.argv) > 2 else None
    pts = collections.defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and (want is None or r["spec"] == want):
            pts[key(r)].append(r)
    for k in sorted(pts):
        reps = pts[k]
        best = max(reps, key=lambda r: r["tps"] or 0)
        c = best["config"]
        d = best["device"]
        n = best["committed"]
        us = best["threads"] / best["tps"] * 1e6
        syncs = d.get("fs_syncs_charged", 0) / n
        fsb = d.get("fs_bytes_charged", 0) / n
        bw = c.get("fs_write_bandwidth_bytes_per_s") or 0
        fs_us = syncs * c.get("fs_sync_ns", 0) / 1e3 + (fsb / bw * 1e6 if bw else 0)
        tps = sorted(r["tps"] for r in reps)
        print(f"{k[0]:17} {k[1]:8} {k[2]:28} tps {best['tps']:9.0f} "
              f"[{tps[0]:.0f}-{tps[-1]:.0f}] {us:8.1f} us/txn delay "
              f"{d['delay_ns'] / n / 1e3:7.1f} fs {fs_us:6.1f} (syncs {syncs:5.2f} "
              f"B {fsb:8.0f}) B/txn {best['per_txn']['bytes_written']:8.0f} "
              f"lines {best['per_txn']['lines_flushed']:6.1f} fences "
              f"{best['per_txn']['fences']:5.2f} fp {best['footprint_bytes']}")
        if "-v" in sys.argv:
            a = best["engine_activity_per_txn"]
            print("    ", {x: round(y, 2) for x, y in a.items() if y})
            print("    ", best.get("kinds"), best["config"]["engine_opts"])


if __name__ == "__main__":
    main()
