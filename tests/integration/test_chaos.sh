#!/usr/bin/env bash
# tests/integration/test_chaos.sh - 20 random SIGKILLs during a 5-epoch sync
# MLP job (2 servers, 2 spares and --respawn 40, 2 workers, --min-workers 1,
# a checkpoint every 50 steps): half the kills take a random worker (W0
# included; only while both are live), half a random live server, in a
# random order (tests/integration/chaos.py; its seed is printed to replay
# the sequence). Every killed worker is started again by the launcher and
# joins the running job; every killed server is replaced from a spare. The
# job ends ok with test accuracy >= 0.87 (0.879 to 0.883 in 12 runs), every
# server kill is a replacement and every worker kill a join in the summary,
# nothing hangs (the launcher's --timeout) and no process is left.
. "$(dirname "$0")/lib.sh"

# Kills 0.1-0.4 s apart, closer than chaos.py's default gaps (0.2-0.7 s), so
# that all 20 land before a short job ends.
/usr/bin/python3 "$(dirname "$0")/chaos.py" --launch "$LAUNCH" --dir "$TMP" --kills 20 \
    --gap 0.1 0.4 --servers 2 --spares 2 --workers 2 --epochs 5 --min-accuracy 0.87 \
    --timeout 240 ||
    fail "chaos run: $(grep -E ' [EW] ' "$TMP/chaos.log" | tail -5)"
check_logs
