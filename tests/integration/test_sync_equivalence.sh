#!/usr/bin/env bash
# Sync training with 2 workers x batch 32 gives the same parameters after 50
# steps as 1 worker x batch 64 over the same global sample order (docs/design/models.md),
# largest relative difference <= 1e-4. Also: two identical sync runs are
# bitwise identical, so the first comparison is not luck; and pushing each
# layer during backward (--overlap 1, the default) gives the bits of one push
# after backward (--overlap 0), with the layers' parts of a step landing on
# both servers (the servers' reports in the summary count the pushes), and
# of pushes cut in chunks of 4 KiB applied chunk by chunk (--chunk-kib 4
# --local-chunks 1: the servers are on this host, whose pushes otherwise go
# whole) or of one message per server and step (--chunk-kib 1024, or on
# this host any chunk: one push-pull).
# The CNN on 1 server (pull replies of 2 frames) gives the bits of 2 servers.
. "$(dirname "$0")/lib.sh"

run() { # name workers batch [flags...]
    local name=$1 workers=$2 batch=$3
    shift 3
    "$LAUNCH" --servers 2 --workers "$workers" --batch "$batch" --max-steps 50 --epochs 1 \
        --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" --log-level info "$@" \
        >"$TMP/$name.log" 2>&1 ||
        fail "$name run failed: $(tail -5 "$TMP/$name.log")"
}
run two 2 32
run one 1 64
run two_again 2 32
run two_whole 2 32 --overlap 0 --chunk-kib 1024
run two_local 2 32 --overlap 0
run two_chunks 2 32 --overlap 0 --chunk-kib 4 --local-chunks 1
params_close "$TMP/two.f32" "$TMP/one.f32" 1e-4 || fail "2x32 and 1x64 differ"
params_close "$TMP/two.f32" "$TMP/two_again.f32" 0 || fail "two identical sync runs differ"
params_close "$TMP/two.f32" "$TMP/two_whole.f32" 0 || fail "layer pushes and whole pushes differ"
params_close "$TMP/two.f32" "$TMP/two_local.f32" 0 || fail "layer pushes and local pushes differ"
params_close "$TMP/two.f32" "$TMP/two_chunks.f32" 0 || fail "chunked pushes and layer pushes differ"
# 2 workers x 50 steps: one push per server per step when whole, as one
# push-pull (also in chunks of 16 KiB, the servers being local); 115 chunks of 1024 keys per server and step when chunked, sent
# in messages of 1 to 16 chunks (64 KiB; as the link's measured pace has
# it: on loopback the most), so 8 to 115 per server and step; S1, which
# holds the last layers, gets more by layers.
pushes() { field "$TMP/$1.json" "d['server_reports'][1]['pushes']"; }
expect "$TMP/two_whole.json" "[r['pushes'] for r in d['server_reports']] == [100, 100]" \
    "whole pushes: expected 100 on each server"
expect "$TMP/two_whole.json" "d['bytes_by_type']['total'].get('push_pull', 0) > 0 and \
    'push_ack' not in d['bytes_by_type']['total']" "--chunk-kib 1024: not one push-pull a step"
expect "$TMP/two_local.json" "[r['pushes'] for r in d['server_reports']] == [100, 100] and \
    'push_ack' not in d['bytes_by_type']['total']" "local servers: not one push-pull a step"
expect "$TMP/two_chunks.json" "all(800 <= r['pushes'] <= 11500 for r in d['server_reports'])" \
    "chunked pushes: expected 50 steps x 2 workers x 8 to 115 messages on each server"
[ "$(pushes two)" -gt 100 ] || fail "S1 served $(pushes two) pushes by layers, expected more than 100"
# Pull replies of several frames: the CNN's 454,922 keys on 1 server are 2
# store chunks, answered as one message of 2 frames; on 2 servers each shard
# is one frame. Sharding changes no key's arithmetic, so the parameters are
# bitwise the same, with push-pulls (--overlap 0) as with layer pushes.
cnn() { run "$1" 2 16 --model cnn --max-steps 20 --servers "$2" --overlap "$3"; }
cnn cnn_one 1 0
cnn cnn_two 2 0
cnn cnn_one_layers 1 1
params_close "$TMP/cnn_one.f32" "$TMP/cnn_two.f32" 0 ||
    fail "CNN: 1 server (replies of 2 frames) and 2 servers differ"
params_close "$TMP/cnn_one.f32" "$TMP/cnn_one_layers.f32" 0 ||
    fail "CNN: whole pushes and layer pushes differ"
echo "ok"
