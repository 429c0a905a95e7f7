#!/usr/bin/env bash
# Each server-side optimizer (with weight decay and a schedule) equals the same
# optimizer applied locally on a fixed sequence of gradients (relative
# difference <= 1e-6), through a real scheduler and two real servers.
. "$(dirname "$0")/lib.sh"

for opt in "sgd --momentum 0" "sgd" "nesterov" "adam --lr 0.001" "adagrad --lr 0.01"; do
    name=${opt%% *}
    # shellcheck disable=SC2086 # opt holds several flags
    start_scheduler "sched-$name" --servers 2 --workers 1 --optimizer $opt \
        --weight-decay 1e-4 --lr-schedule cosine --warmup-steps 3 --batch 64 --epochs 1
    start "s0-$name" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
    start "s1-$name" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
    timeout 60 "$SPS_BUILD/tests/integration/sps-optim-check" "$SCHED_EP" 20 ||
        fail "$opt: server-side and local updates differ"
    wait_pid "$SCHED_PID" 20 || fail "$opt: scheduler did not exit"
    [ "$WAIT_RC" -eq 0 ] || fail "$opt: scheduler exited $WAIT_RC: $(tail -3 "$TMP/sched-$name.log")"
done
echo ok
