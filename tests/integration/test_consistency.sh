#!/usr/bin/env bash
# The consistency modes against each other, through the launcher users run:
# - ssp:0 gives bitwise the same parameters as sync;
# - async with 1 worker gives bitwise the same parameters as sync with 1 worker;
# - the shard map does not change the arithmetic: 1, 3 and 7 servers give
#   bitwise the same parameters (a tensor split across servers included);
# - under ssp:2 with a 3x straggler no applied gradient is more than 2 steps
#   stale (from the servers' telemetry), and some are stale (the bound is used);
# - sync:1/2 keeps stepping while worker 1 is 30x slower: worker 0 takes every
#   step, worker 1 far fewer, and its late pushes are counted as dropped;
# - a step that waits too long logs which worker it waits for;
# - async over several workers with momentum 0.9 and --staleness-lr 0 is
#   warned about (it diverges); by default (the weights on), with 1 worker
#   or with momentum below 0.5 it is not; by default its servers run lower
#   momentum at a higher rate (the summary says which).
. "$(dirname "$0")/lib.sh"

run() { # name, launcher flags...
    local name=$1
    shift
    "$LAUNCH" --log-level warn --summary "$TMP/$name.json" "$@" >"$TMP/$name.log" 2>&1 ||
        fail "$name: job failed: $(tail -5 "$TMP/$name.log")"
}

run sync --servers 2 --workers 2 --max-steps 40 --dump-params "$TMP/sync.f32"
run ssp0 --servers 2 --workers 2 --max-steps 40 --mode ssp:0 --dump-params "$TMP/ssp0.f32"
params_close "$TMP/sync.f32" "$TMP/ssp0.f32" 0 || fail "ssp:0 differs from sync"

run sync1 --servers 2 --workers 1 --max-steps 40 --dump-params "$TMP/sync1.f32"
run async1 --servers 2 --workers 1 --max-steps 40 --mode async --dump-params "$TMP/async1.f32"
params_close "$TMP/sync1.f32" "$TMP/async1.f32" 0 || fail "async with 1 worker differs from sync"
MOMENTUM_WARNING='async over 2 workers with momentum 0.9 and --staleness-lr 0: every push'
run async2 --servers 1 --workers 2 --max-steps 5 --mode async --staleness-lr 0
grep -q "C W $MOMENTUM_WARNING" "$TMP/async2.log" || fail "no warning of async momentum 0.9"
run async2d --servers 1 --workers 2 --max-steps 5 --mode async
run async2m --servers 1 --workers 2 --max-steps 5 --mode async --momentum 0.4 --staleness-lr 0
grep -q 'staleness adds momentum' "$TMP/async2d.log" "$TMP/async2m.log" "$TMP/async1.log" &&
    fail "warned of async momentum by default, with 1 worker or momentum 0.4"
# By default async over 2 workers runs momentum 0.9 - 1/2 at a rate making
# up for it ((1 - 0.4) / (1 - 0.9) = 6); not without the weights, nor in sync.
expect "$TMP/async2d.json" \
    "abs(d['server_momentum'] - 0.4) < 1e-9 and abs(d['server_rate_factor'] - 6) < 1e-9" \
    "async over 2 workers did not lower its momentum"
expect "$TMP/async2m.json" "d['server_momentum'] == 0.4 and d['server_rate_factor'] == 1" \
    "--staleness-lr 0 changed the momentum"
expect "$TMP/sync.json" "d['server_momentum'] == 0.9 and d['server_rate_factor'] == 1" \
    "sync changed the momentum"

for s in 1 3 7; do
    run "shards$s" --servers "$s" --workers 2 --max-steps 20 --dump-params "$TMP/shards$s.f32"
done
params_close "$TMP/shards1.f32" "$TMP/shards3.f32" 0 || fail "3 servers differ from 1"
params_close "$TMP/shards1.f32" "$TMP/shards7.f32" 0 || fail "7 servers differ from 1"

run ssp2 --servers 2 --workers 2 --max-steps 150 --mode ssp:2 --straggler 1:3
max=$(field "$TMP/ssp2.json" "d['staleness']['max']")
mean=$(field "$TMP/ssp2.json" "d['staleness']['mean']")
echo "ssp:2 with a 3x straggler: staleness max $max, mean $mean"
[ "$max" -le 2 ] || fail "ssp:2 applied a gradient $max steps stale"
[ "$max" -ge 1 ] || fail "ssp:2 with a straggler never used its staleness bound"

run backup --servers 2 --workers 2 --max-steps 150 --mode sync:1/2 --straggler 1:30
steps=$(field "$TMP/backup.json" "d['worker_steps']")
dropped=$(field "$TMP/backup.json" "d['pushes_dropped']")
echo "sync:1/2 with a 30x straggler: worker steps $steps, pushes dropped $dropped"
field "$TMP/backup.json" "d['worker_steps'][0] == 150 and d['worker_steps'][1] < 75" |
    grep -qx True || fail "sync:1/2 did not keep stepping without the straggler: $steps"
[ "$dropped" -ge 1 ] || fail "sync:1/2 dropped no late push"
# A step held up by a slow worker is reported, naming the worker.
run missing --servers 1 --workers 2 --max-steps 3 --straggler 1:1000 --report-missing 0.3
grep -E 'S0 W step [0-9]+ of keys \[0, [0-9]+\) has waited [0-9.]+ s for: W1 ' "$TMP/missing.log" \
    >/dev/null || fail "no line names the worker a step waits for: $(grep -c waited "$TMP/missing.log")"
grep -q 'for: W0' "$TMP/missing.log" && fail "the fast worker was reported missing"
echo ok
