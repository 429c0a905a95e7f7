#!/usr/bin/env bash
# tests/integration/test_ctr_resume.sh - checkpoints and bitwise resume of a
# job with embedding rows (--model ctr), through the launcher users run, on
# a click log shardps-datagen writes here (20,000 lines).
#
# A sync 2x2 adagrad job of 60 steps checkpointing every 20 is the
# reference; its checkpoint directory, trimmed to step 40, is resumed with
# --resume: the parameters end bitwise the reference's (cmp of
# --dump-params: the dense ones and the rows of the log's keys), and so do
# all the rows, their optimizer state and the pending sightings, compared
# tensor by tensor in the two runs' step-60 checkpoints, merged by key over
# the parts (rows_equal below, python on the safetensors headers). The same with --min-count 2, whose step-40
# checkpoint must hold pending sightings (keys seen once, no row yet); that
# one is also resumed on 3 servers (the rows re-cut by their keys' hashes),
# bitwise again. A resume whose job does not match the rows (another
# --min-count, a --max-rows they do not fit; let past the scheduler's own
# check of the flags with --resume-override) fails with exit 1, a server's
# one line naming the checkpoint and what differs, and trains nothing. Last, S1 killed
# after checkpoint step-20 of the --min-count 2 job with a spare waiting:
# the spare loads S1's rows, S0 reloads its own, every node rolls back, and
# the job ends bitwise the reference, rows included.
. "$(dirname "$0")/lib.sh"
GEN=$SPS_BUILD/deploy/shardps-datagen
DATA=$TMP/d.tsv
"$GEN" ctr --rows 20000 --seed 3 --out "$DATA" >"$TMP/gen.out" 2>&1 ||
    fail "shardps-datagen ctr: $(cat "$TMP/gen.out")"

# ctr NAME SERVERS [flags...]: the job, checkpointing every 20 steps; its
# dense parameters in $TMP/NAME.f32, summary $TMP/NAME.json, output
# $TMP/NAME.log, exit status in RC.
ctr() {
    local name=$1 servers=$2
    shift 2
    "$LAUNCH" --servers "$servers" --workers 2 --model ctr --ctr-data "$DATA" --batch 64 \
        --max-steps 60 --optimizer adagrad --lr 0.05 --checkpoint-every 20 --plot none \
        --log-level info --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" "$@" \
        >"$TMP/$name.log" 2>&1
    RC=$?
}

# rows_equal A B: the rows of checkpoint steps A and B (DIR/step-N, the
# files their manifests name, any number of parts each) are the same:
# every tensor rows.* of each part read by its header (dtype, shape,
# offsets), the parts' keys ascending and each part's own, merged by key,
# compared bitwise (values and each state array per row, counts per pending
# key). Prints "ROWS PENDING" of A.
rows_equal() {
    python3 - "$1" "$2" <<'EOF'
import json, os, struct, sys
from array import array

def part(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    meta = head.pop('__metadata__')
    def tensor(name, dtype, width):
        t = head[name]
        assert t['dtype'] == dtype, (path, name, t['dtype'])
        b, e = t['data_offsets']
        raw = data[b:e]
        assert len(raw) == width * (len(raw) // width)
        return t['shape'], raw
    dim = int(meta['embed_dim'])
    shape, raw = tensor('rows.keys', 'U64', 8)
    keys = array('Q', raw)
    assert list(keys) == sorted(set(keys)), path + ': rows.keys not ascending'
    vshape, values = tensor('rows.values', 'F32', 4)
    assert vshape == [len(keys), dim], (path, vshape)
    states = sorted(k for k in head if k.startswith('rows.opt.'))
    state = [tensor(k, 'F32', 4)[1] for k in states]
    _, praw = tensor('rows.pending.keys', 'U64', 8)
    _, craw = tensor('rows.pending.counts', 'U32', 4)
    pkeys, counts = array('Q', praw), array('I', craw)
    assert list(pkeys) == sorted(set(pkeys)), path + ': pending keys not ascending'
    row = 4 * dim
    rows = {k: (states, values[i * row:(i + 1) * row],
                tuple(s[i * row:(i + 1) * row] for s in state)) for i, k in enumerate(keys)}
    return rows, dict(zip(pkeys, counts))

def step(d):
    manifest = json.load(open(os.path.join(d, 'manifest.json')))
    rows, pending = {}, {}
    for p in manifest['parts']:
        r, q = part(os.path.join(d, p['file']))
        assert not set(r) & set(rows) and not set(q) & set(pending), 'a key in two parts'
        rows.update(r)
        pending.update(q)
    return rows, pending

(ra, pa), (rb, pb) = step(sys.argv[1]), step(sys.argv[2])
assert ra, sys.argv[1] + ': no rows'
if ra != rb or pa != pb:
    differ = [k for k in ra if rb.get(k) != ra[k]]
    sys.exit('%d and %d rows, %d and %d pending keys; %d rows differ (first: %s)' %
             (len(ra), len(rb), len(pa), len(pb), len(differ), differ[:1]))
print(len(ra), len(pa))
EOF
}

# same NAME REF: NAME's final parameters (--dump-params) and step-60 rows
# are REF's, bitwise.
same() {
    cmp -s "$TMP/$2.f32" "$TMP/$1.f32" || fail "$1: parameters differ from $2's"
    SAME=$(rows_equal "$TMP/ck_$2/step-60" "$TMP/ck_$1/step-60") ||
        fail "$1: rows differ from $2's: $SAME"
}

# resume NAME REF SERVERS [flags...]: REF's checkpoint directory without
# step-60, copied to ck_NAME and resumed there (so from step 40).
resume() {
    local name=$1 ref=$2 servers=$3
    shift 3
    cp -r "$TMP/ck_$ref" "$TMP/ck_$name"
    rm -rf "$TMP/ck_$name/step-60"
    ctr "$name" "$servers" --resume "$TMP/ck_$name" "$@"
}

# ---- 1. resume: dense parameters and rows bitwise --------------------------
ctr full 2 --checkpoint-dir "$TMP/ck_full"
[ "$RC" = 0 ] || fail "reference run failed: $(tail -5 "$TMP/full.log")"
resume resumed full 2
[ "$RC" = 0 ] || fail "resumed run failed: $(tail -5 "$TMP/resumed.log")"
grep -q "resuming from $TMP/ck_resumed/step-40 " "$TMP/resumed.log" ||
    fail "did not resume from step-40: $(grep -i resum "$TMP/resumed.log")"
same resumed full
echo "ok - resumed at step 40: bitwise, $SAME (rows, pending keys)"

# ---- 2. --min-count 2: the pending sightings survive -----------------------
ctr filter 2 --min-count 2 --checkpoint-dir "$TMP/ck_filter"
[ "$RC" = 0 ] || fail "--min-count 2 run failed: $(tail -5 "$TMP/filter.log")"
AT40=$(rows_equal "$TMP/ck_filter/step-40" "$TMP/ck_filter/step-40") || fail "step-40: $AT40"
[ "${AT40#* }" -gt 0 ] || fail "--min-count 2: no pending sightings at step 40 ($AT40)"
resume filter_resumed filter 2 --min-count 2
[ "$RC" = 0 ] || fail "--min-count 2 resume failed: $(tail -5 "$TMP/filter_resumed.log")"
same filter_resumed filter
echo "ok - --min-count 2 resumed at step 40 ($AT40 rows, pending keys there): bitwise, $SAME"
resume three filter 3 --min-count 2
[ "$RC" = 0 ] || fail "resume on 3 servers failed: $(tail -5 "$TMP/three.log")"
grep -q "resumed at step 40 from 2 parts" "$TMP/three.log" || fail "3 servers: no load line"
same three filter
echo "ok - resumed on 3 servers (rows re-cut by hash): bitwise, $SAME"

# ---- 3. a job the rows do not match: one line, nothing trained -------------
# refused NAME WANT: NAME failed with exit 1, a server saying WANT in one
# line (the first to say it ends the job: the other may not get to).
refused() {
    [ "$RC" = 1 ] || fail "$1: exit $RC, not 1: $(tail -3 "$TMP/$1.log")"
    grep -q "S[01] E cannot resume: $TMP/ck_$1/step-40.*$2" "$TMP/$1.log" ||
        fail "$1: no one-line reason: $(grep -E ' [EW] ' "$TMP/$1.log")"
    [ ! -e "$TMP/$1.f32" ] || fail "$1: refused, yet the job trained"
}
# (the scheduler refuses these flags up front; overridden, the servers do)
resume other_filter filter 2 --min-count 3 --resume-override min-count
refused other_filter "server-[01].safetensors: rows of --min-count 2, the job's is 3"
resume too_many filter 2 --min-count 2 --max-rows 100 --resume-override max-rows
refused too_many ": [0-9]* rows for this server, more than the job's --max-rows 100"
echo "ok - rows of another layout refused:" \
    "$(grep -o 'S[01] E cannot resume: .*' "$TMP/other_filter.log" | head -1)"

# ---- 4. a lost server's rows come back from the checkpoint -----------------
ctr fo 2 --min-count 2 --checkpoint-dir "$TMP/ck_fo" --spares 1 --peer-timeout 5 \
    --straggler 1:20 &
JOB_PID=$!
PIDS+=("$JOB_PID")
kill_s1_after "$TMP/ck_fo/step-20/manifest.json" "$TMP/fo.log"
expect "$TMP/fo.json" "len(d['server_replacements']) == 1 and d['status'] == 'ok'" \
    "one replacement"
grep -q "S0 I failover 1: rolled back from step" "$TMP/fo.log" ||
    fail "S0 did not roll back: $(grep failover "$TMP/fo.log")"
same fo filter
echo "ok - S1 replaced, rolled back to step" \
    "$(field "$TMP/fo.json" "d['server_replacements'][0]['step']"): bitwise, $SAME"
no_leftovers "$TMP/fo.log"
check_logs
