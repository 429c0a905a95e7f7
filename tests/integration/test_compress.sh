#!/usr/bin/env bash
# --wire and --compress through the launcher users run (2 servers, 2 workers,
# the MLP, real processes on loopback), checked on the summary JSON:
# - every job ends ok and trains: accuracy above chance by far; sync bf16
#   within 2 points of sync fp32 after the same steps (sync is deterministic);
# - the payload bytes are exactly what the dtype or the compression predicts:
#   bf16 pushes 2 bytes a key, every pull too; topk:R pushes, per step and
#   server part of n keys, ceil(R n) entries of 4 + 2 bytes (fp16 values);
# - bytes_by_type adds up: what the workers sent as pushes the servers
#   received, what the servers sent as pull replies the workers received,
#   and each push carries a header of a few dozen bytes on top of its payload.
. "$(dirname "$0")/lib.sh"

STEPS=150
run() { # name, launcher flags...
    local name=$1
    shift
    "$LAUNCH" --log-level warn --servers 2 --workers 2 --max-steps $STEPS \
        --summary "$TMP/$name.json" "$@" >"$TMP/$name.log" 2>&1 ||
        fail "$name: job failed: $(tail -5 "$TMP/$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "$name: not ok"
    echo "$name: accuracy $(field "$TMP/$name.json" "d['test_accuracy']")," \
        "pushed $(field "$TMP/$name.json" "d['bytes_pushed']") bytes"
}

# The byte accounting of one summary: pushes and pull replies sent = received.
# Pushes travel as MSG_PUSH (layers pushed as backward ends them) or inside
# MSG_PUSH_PULL (a push and its pull in one request): pushed() sums both.
balanced() { # name
    local pushed="(lambda c: c.get('push', 0) + c.get('push_pull', 0))"
    expect "$TMP/$1.json" "sum($pushed(w['sent']) for w in d['bytes_by_type']['workers']) == \
        sum($pushed(s['received']) for s in d['bytes_by_type']['servers'])" \
        "$1: pushes sent and received differ"
    expect "$TMP/$1.json" "sum(s['sent']['pull_reply'] for s in d['bytes_by_type']['servers']) == \
        sum(w['received']['pull_reply'] for w in d['bytes_by_type']['workers'])" \
        "$1: pull replies sent and received differ"
    expect "$TMP/$1.json" "0 < $pushed(d['bytes_by_type']['total']) - d['bytes_pushed'] < \
        100 * d['steps'] * d['workers'] * d['servers'] * 3" \
        "$1: push headers are not a few dozen bytes each"
}

run fp32 --wire fp32 --overlap 0
run bf16 --wire bf16 --overlap 0
run topk --wire fp16 --compress topk:0.01 --overlap 0
run async --mode async --wire fp16
run ssp --mode ssp:2 --wire bf16 --compress topk:0.05

P=$(field "$TMP/fp32.json" "d['num_params']")
M=2
expect "$TMP/fp32.json" "d['bytes_pushed'] == $STEPS * $M * $P * 4" "fp32: pushes are not 4 bytes a key"
expect "$TMP/bf16.json" "d['wire'] == 'bf16' and d['bytes_pushed'] == $STEPS * $M * $P * 2" \
    "bf16: pushes are not 2 bytes a key"
# every pull (one per step and the first) in bf16: half of fp32's
expect "$TMP/bf16.json" "2 * d['bytes_pulled'] == $(field "$TMP/fp32.json" "d['bytes_pulled']")" \
    "bf16: pulls are not 2 bytes a key"
# --overlap 0: one push of [0, P) a step, one part per server of the even split
expect "$TMP/topk.json" "d['compress'] == 'topk:0.01' and d['bytes_pushed'] == $STEPS * $M * \
    sum(-(-n // 100) * 6 for n in [$P // 2 + $P % 2, $P // 2])" \
    "topk:0.01: pushed bytes are not ceil(R n) (offset + fp16 value) per server part"
for name in fp32 bf16 topk async ssp; do
    balanced $name
    expect "$TMP/$name.json" "d['test_accuracy'] > 0.6" "$name: did not train"
done
expect "$TMP/bf16.json" "abs(d['test_accuracy'] - $(field "$TMP/fp32.json" "d['test_accuracy']")) < 0.02" \
    "bf16 is more than 2 points from fp32"
check_logs
echo ok
