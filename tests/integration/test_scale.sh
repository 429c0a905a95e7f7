#!/usr/bin/env bash
# tests/integration/test_scale.sh - 64 workers and 16 servers on this machine.
#
# shardps-launch --servers 16 --workers 64, the MLP with batch 8 for a few
# steps (--max-steps), once in sync and once in async: 81 processes on however
# few cores the machine has. Each job ends ok; every worker took every step
# and pushed every key of every step (the bytes are exact); the 16 servers'
# ranges cut [0, P) with none empty, each server applied every step (sync:
# version = steps; async: one update per push it accepted) and refused
# nothing; no message was refused anywhere; and once the launcher is gone no
# process of the job is left. Waits are generous (a loaded 2-core machine
# loads 64 copies of the data set): no timing is asserted; --peer-timeout is
# raised so that a starved heartbeat does not end the job, --connect-timeout
# so that a node whose registration the starved scheduler answers late
# still joins.
. "$(dirname "$0")/lib.sh"

S=16 M=64 STEPS=6
# The launcher's pipes and every socket: far below any usual limit, but a
# shell started with a tiny one would fail for the wrong reason.
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge 512 ] ||
    skip "ulimit -n is $(ulimit -n): 81 processes need more descriptors"
# The data set uncompressed, once: 64 workers each gunzipping it is most of
# the job's start on 2 cores (a worker reads plain IDX files when no .gz is there).
DATA=${SHARDPS_DATA:-/usr/share/datasets/fashion-mnist}
mkdir "$TMP/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
    t10k-labels-idx1-ubyte; do
    gzip -dc "$DATA/$f.gz" >"$TMP/data/$f" 2>/dev/null ||
        cp "$DATA/$f" "$TMP/data/$f" 2>/dev/null || skip "no Fashion-MNIST in $DATA"
done

# check MODE: every assertion on the job's summary, in one Python (each
# start costs a second on a loaded machine); fails naming the first that fails.
check() {
    local out
    out=$(python3 - "$TMP/$1.json" "$1" $S $M $STEPS <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mode, S, M, steps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = d.get('server_reports', [])
def need(ok, what):
    if not ok:
        print(what)
        sys.exit(1)
need(d['status'] == 'ok', 'job not ok')
need(d['servers'] == S and d['workers'] == M, "the job's size")
need(d['steps'] == steps, 'steps')
need(d['worker_steps'] == [steps] * M, 'every worker took every step')
need(d['samples'] == M * steps * 8, "every worker's samples")
need(d['bytes_pushed'] == M * steps * d['num_params'] * 4,
     'every worker pushed every key of every step')
need(len(d['nodes']) == S + M and all(n['pid'] > 0 for n in d['nodes']),
     'every node registered')
need([x['rank'] for x in r] == list(range(S)), 'one report per server')
# the servers' ranges cut [0, P) in order, none empty
need(r[0]['keys'][0] == 0 and r[-1]['keys'][1] == d['num_params'] and
     all(a['keys'][1] == b['keys'][0] for a, b in zip(r, r[1:])) and
     all(x['keys'][0] < x['keys'][1] for x in r), "the servers' ranges")
# a push part covers a piece of a server's range: at least one per worker and step
need(all(x['pushes'] >= M * steps for x in r), "every worker's pushes reached every server")
need(all(x['rejected'] == 0 and x['dropped'] == 0 for x in r),
     'a server refused or dropped a message')
need(d['scheduler_refused'] == 0 and d['messages_rejected'] == 0, 'messages refused')
need(d['scheduler_messages'] > 0 and d['scheduler_cpu_seconds'] > 0 and
     all(x['cpu_seconds'] > 0 for x in r), 'the cost figures')
if mode == 'sync':
    need(all(x['version'] == steps for x in r), 'every server applied every step')
else:
    need(all(x['version'] == x['pushes'] for x in r), 'every server applied every push')
PY
    ) || fail "$1: $out: $(cat "$TMP/$1.json" 2>/dev/null || echo "no summary")"
}

run_job() { # MODE
    local name=$1 job="scale-$$-$1"
    start "$name" "$LAUNCH" --servers $S --workers $M --mode "$name" --max-steps $STEPS \
        --batch 8 --threads 1 --peer-timeout 60 --connect-timeout 120 --wait 600 --job-id "$job" \
        --data "$TMP/data" --summary "$TMP/$name.json" --plot none
    local lpid=$LAST_PID
    wait_pid "$lpid" 900 || fail "$name: the job did not end: $(tail -5 "$TMP/$name.log")"
    [ "$WAIT_RC" = 0 ] || fail "$name: launcher exited $WAIT_RC: $(tail -8 "$TMP/$name.log")"
    check "$name"
    # nothing of the job is left running
    local p left=""
    for p in $(field "$TMP/$name.json" "' '.join(str(n['pid']) for n in d['nodes'])"); do
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- "$job" && left="$left $p"
    done
    [ -z "$left" ] || fail "$name: processes of the job left running:$left"
}

run_job sync
run_job async
check_logs
echo "ok: $M workers x $S servers, sync and async"
