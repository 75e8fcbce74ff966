#!/usr/bin/env python3
# Evidence for the NVWAL Table 2 causes in experiments/nvwal-table2-bytes.toml (issue 36).
# Usage: tools/nvwal_replay.py insert|update|delete N TXNS [RECORDS [alt]]
#   `alt` (any 5th argument): updates draw keys from one worker's partition (key % 64 == 0, as
#   our bench does) and deletes go in descending key order; without it, updates draw from every
#   row and deletes ascend.
# Replays Mobibench-style txns on Python's SQLite (3.40) in WAL mode, parses the -wal file and
# computes, per frame, what sqlite-nvwal would store: off (whole page), range (one changed range
# against the page's previous frame in the same WAL generation), on (several ranges, gaps > 4 split,
# <= 32). Generations restart after a commit that brings the WAL to >= 1000 frames (autocheckpoint).
import sqlite3, os, sys, random, struct, collections
op, n, txns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records = {'insert': 0, 'update': 1000, 'delete': 40000}[op]
if len(sys.argv) > 4: records = int(sys.argv[4])
import tempfile
os.makedirs(os.path.join(tempfile.gettempdir(), 'nvwal-replay'), exist_ok=True)
path = os.path.join(tempfile.gettempdir(), 'nvwal-replay', f'db-{op}-{n}.db')
for s in ('', '-wal', '-shm'):
    if os.path.exists(path + s): os.remove(path + s)
c = sqlite3.connect(path, isolation_level=None)
c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA synchronous=FULL')
c.execute('CREATE TABLE t (k INTEGER PRIMARY KEY, row BLOB NOT NULL)')
rng = random.Random(42)
def row(k, tag): return struct.pack('<QQ', k, tag) + bytes(rng.getrandbits(8) for _ in range(84))
c.execute('BEGIN')
for k in range(records): c.execute('INSERT INTO t VALUES (?,?)', (k, row(k, 0)))
c.execute('COMMIT')
c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
c.execute('PRAGMA wal_autocheckpoint=0')
for t in range(txns):
    c.execute('BEGIN')
    for i in range(n):
        if op == 'insert':
            k = records + t * n + i; c.execute('INSERT INTO t VALUES (?,?)', (k, row(k, t + 1)))
        elif op == 'update':
            k = 64 * rng.randrange(records // 64) if len(sys.argv) > 5 else rng.randrange(records); c.execute('UPDATE t SET row=? WHERE k=?', (row(k, t + 1), k))
        else:
            c.execute('DELETE FROM t WHERE k=?', ((records - 1 - (t * n + i)) if len(sys.argv) > 5 else (t * n + i),))
    c.execute('COMMIT')
w = open(path + '-wal', 'rb').read()
P = 4096; FH = 24
frames = [(struct.unpack('>II', w[32+i*(P+FH):32+i*(P+FH)+8]), w[32+i*(P+FH)+FH:32+(i+1)*(P+FH)])
          for i in range((len(w) - 32) // (P + FH))]
def al(x): return (x + 7) // 8 * 8
def runs(a, b):
    r = []; i = 0
    while i < P:
        if a[i] == b[i]: i += 1; continue
        s = i
        while i < P and a[i] != b[i]: i += 1
        if r and s - r[-1][1] <= 4: r[-1][1] = i
        else: r.append([s, i])
    if len(r) > 32:
        gaps = sorted(((r[k+1][0] - r[k][1], -k) for k in range(len(r) - 1)), reverse=True)[:31]
        split = {-g[1] for g in gaps}; m = []; open_ = False
        for k, x in enumerate(r):
            if m and open_: m[-1][1] = x[1]
            else: m.append(list(x))
            open_ = k not in split
        r = m
    return r
tot = collections.Counter(); last = {}; gen_frames = 0; gen_pages = set(); ckpt_pages = 0
commits = 0; whole_new = 0; per_txn_frames = 0
for (pg, commit), page in frames:
    tot['frames'] += 1; gen_frames += 1; gen_pages.add(pg)
    tot['off'] += 48 + P
    if pg in last:
        base = last[pg]; r = runs(base, page)
        if not r: rr = []
        else: rr = [[r[0][0], r[-1][1]]]
        one = 4 * len(rr) + sum(e - s for s, e in rr)
        several = 4 * len(r) + sum(e - s for s, e in r)
        tot['range'] += 48 + al(one) if one < P else 48 + P
        tot['on'] += 48 + al(several) if several < P else 48 + P
        tot['range_payload'] += min(one, P); tot['on_payload'] += min(several, P)
        if rr:
            # the one range: how much of it is unchanged bytes inside (the gap it spans)
            tot['range_unchanged'] += sum(1 for i in range(rr[0][0], rr[0][1]) if base[i] == page[i])
        tot['diffed'] += 1
    else:
        tot['range'] += 48 + P; tot['on'] += 48 + P; tot['whole_first'] += 1
    last[pg] = page
    if commit:
        commits += 1
        if gen_frames >= 1000:
            ckpt_pages += len(gen_pages); last = {}; gen_frames = 0; gen_pages = set()
tot['ckpt_pages_done'] = ckpt_pages; print('raw', dict(tot))
print(op, n, 'txns', commits, {k: round(v / commits, 1) for k, v in tot.items()},
      'range/off %.3f on/off %.3f' % (tot['range'] / tot['off'], tot['on'] / tot['off']))
