#!/usr/bin/env bash
# tests/integration/test_chaos.sh - 20 random SIGKILLs during a 10-epoch sync
# MLP job (2 servers, 2 spares and --respawn 40, 2 workers, --min-workers 1,
# a checkpoint every 50 steps): half the kills take a random worker (W0
# included; only while both are live), half a random live server, in a
# random order (tests/integration/chaos.py; its seed is printed to replay
# the sequence). Every killed worker is started again by the launcher and
# joins the running job; every killed server is replaced from a spare. The
# job ends ok with test accuracy >= 0.87, every server kill is a
# replacement and every worker kill a join in the summary, nothing hangs
# (the launcher's --timeout) and no process is left.
#
# Then with hot replicas (--replicas 1): 20 kills of servers only (each
# once its replica is in step), no checkpoint directory at all: every kill
# is a takeover, and the parameters are bitwise those of the same job
# undisturbed; and 20 kills of servers and workers, as above, with replicas.
. "$(dirname "$0")/lib.sh"

chaos() { # name [chaos.py flags...]
    local name=$1
    shift
    mkdir -p "$TMP/$name"
    /usr/bin/python3 "$(dirname "$0")/chaos.py" --launch "$LAUNCH" --dir "$TMP/$name" \
        --servers 2 --workers 2 --timeout 240 "$@" >"$TMP/$name.out" 2>&1 ||
        fail "chaos run $name: $(grep FAIL "$TMP/$name.out") $(grep -E ' [EW] ' \
            "$TMP/$name/chaos.log" | tail -5)
the scheduler's last lines but checkpoints:
$(grep -E '^[^ ]+ C ' "$TMP/$name/chaos.log" | grep -v ' checkpoint step-' | tail -12)"
}

# Kills 0.1-0.4 s apart, closer than chaos.py's default gaps (0.2-0.7 s), so
# that all 20 land before a short job ends; 10 epochs, so that the 10 worker
# kills, each waiting for the rejoin before it (up to 2 s on a loaded
# machine), land before the last epoch, which takes none.
mixed=(--epochs 10 --kills 20 --gap 0.1 0.4 --spares 2 --min-accuracy 0.87)
chaos mixed "${mixed[@]}"

replicas=(--epochs 5 --replicas 1 --spares 0 --servers-only --no-checkpoints --min-accuracy 0.87)
chaos undisturbed --kills 0 "${replicas[@]}" --dump-params "$TMP/undisturbed.f32"
chaos takeovers --kills 20 --gap 0.1 0.4 "${replicas[@]}" --dump-params "$TMP/takeovers.f32"
cmp -s "$TMP/undisturbed.f32" "$TMP/takeovers.f32" ||
    fail "parameters after 20 takeovers differ from the undisturbed run"
expect "$TMP/takeovers/chaos.json" "d['replicas']['takeovers'] == 20 and \
    d['replicas']['steps_rolled_back'] == 0" "20 takeovers, nothing rolled back"

chaos mixed_replicas "${mixed[@]}" --replicas 1
check_logs
