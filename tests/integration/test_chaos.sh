#!/usr/bin/env bash
# tests/integration/test_chaos.sh - 20 random SIGKILLs during a 5-epoch sync
# MLP job (2 servers, 2 spares and --respawn 20, 2 workers, --min-workers 1,
# a checkpoint every 50 steps): the job ends ok with test accuracy >= 0.87,
# every server kill is a replacement in the summary, nothing hangs (the
# launcher's --timeout) and no process is left. Workers cannot rejoin yet, so
# one kill, at a random place in the sequence, takes W1 and 19 take servers
# (tests/integration/chaos.py; its seed is printed to replay the sequence).
# With 3 workers (2 worker kills) the job ends at 0.872-0.876, too close to
# 0.87 for a test that must not flake: W0 then sees a third of each epoch.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 "$(dirname "$0")/chaos.py" --launch "$LAUNCH" --dir "$TMP" --kills 20 \
    --servers 2 --spares 2 --workers 2 --epochs 5 --min-accuracy 0.87 --timeout 240 ||
    fail "chaos run: $(grep -E ' [EW] ' "$TMP/chaos.log" | tail -5)"
check_logs
