#!/usr/bin/env bash
# tests/integration/test_chaos.sh - 20 random SIGKILLs during a 5-epoch sync
# MLP job (2 servers, 2 spares and --respawn 20, 3 workers, --min-workers 1,
# a checkpoint every 50 steps): the job ends ok with test accuracy >= 0.87,
# every server kill is a replacement in the summary, nothing hangs (the
# launcher's --timeout) and no process is left. Workers cannot rejoin yet, so
# 2 of the kills take W1 and W2 and 18 take servers (tests/integration/
# chaos.py; its seed is printed to replay the kill sequence).
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 "$(dirname "$0")/chaos.py" --launch "$LAUNCH" --dir "$TMP" --kills 20 \
    --servers 2 --spares 2 --workers 3 --epochs 5 --min-accuracy 0.87 --timeout 240 ||
    fail "chaos run: $(grep -E ' [EW] ' "$TMP/chaos.log" | tail -5)"
check_logs
