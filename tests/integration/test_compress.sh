#!/usr/bin/env bash
# --wire and --compress through the launcher users run (2 servers, 2 workers,
# the MLP, real processes on loopback), checked on the summary JSON:
# - every job ends ok and trains: accuracy above chance by far; sync bf16
#   within 2 points of sync fp32 after the same steps (sync is deterministic);
# - the payload bytes are exactly what the dtype or the compression predicts:
#   bf16 pushes 2 bytes a key, every pull too; topk:R pushes, per step, for
#   each piece of n keys of a tensor in a server part, ceil(R n) entries of
#   4 + 2 bytes (fp16 values), or all n when the tensor has at most ceil(R P)
#   keys (sent whole), however the pushes are cut (by layer or whole);
# - bytes_by_type adds up: what the workers sent as pushes the servers
#   received, what the servers sent as pull replies the workers received,
#   and each push (a message per layer part and chunk) carries a header of a
#   few dozen bytes on top of its payload.
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
    # a push message per layer part and per --chunk-kib chunk of a shard
    expect "$TMP/$1.json" "0 < $pushed(d['bytes_by_type']['total']) - d['bytes_pushed'] < \
        100 * d['steps'] * d['workers'] * d['servers'] * \
        (3 + -(-d['num_params'] // d['servers'] // (d['chunk_kib'] * 256)))" \
        "$1: push headers are not a few dozen bytes each"
}

run fp32 --wire fp32 --overlap 0
run bf16 --wire bf16 --overlap 0
run topk --wire fp16 --compress topk:0.01
run topk0 --wire fp16 --compress topk:0.01 --overlap 0
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
# entries of one step's pushes of a worker: the MLP's tensors (784-256-128-10)
# cut by the even split of 2 servers
NNZ=$(python3 -c "
P = $P; tensors = [256 * 784, 256, 128 * 256, 128, 10 * 128, 10]; assert sum(tensors) == P
half = P // 2 + P % 2; budget = -(-P // 100); nnz = 0; at = 0
for size in tensors:
    for b, e in [(0, half), (half, P)]:
        n = min(e, at + size) - max(b, at)
        nnz += 0 if n <= 0 else n if size <= budget else -(-n // 100)
    at += size
print(nnz)")
for name in topk topk0; do
    expect "$TMP/$name.json" "d['compress'] == 'topk:0.01' and d['bytes_pushed'] == \
        $STEPS * $M * $NNZ * 6" \
        "$name: pushed bytes are not ceil(R n) per tensor piece, small tensors whole (offset + fp16)"
done
for name in fp32 bf16 topk topk0 async ssp; do
    balanced $name
    expect "$TMP/$name.json" "d['test_accuracy'] > 0.6" "$name: did not train"
done
expect "$TMP/bf16.json" "abs(d['test_accuracy'] - $(field "$TMP/fp32.json" "d['test_accuracy']")) < 0.02" \
    "bf16 is more than 2 points from fp32"
check_logs
echo ok
