#!/usr/bin/env bash
# Sync training with 2 workers x batch 32 gives the same parameters after 50
# steps as 1 worker x batch 64 over the same global sample order (DESIGN.md),
# largest relative difference <= 1e-4. Also: two identical sync runs are
# bitwise identical, so the first comparison is not luck.
. "$(dirname "$0")/lib.sh"

run() { # name workers batch
    "$LAUNCH" --servers 2 --workers "$2" --batch "$3" --max-steps 50 --epochs 1 \
        --dump-params "$TMP/$1.f32" --log-level warn >"$TMP/$1.log" 2>&1 ||
        fail "$1 run failed: $(tail -5 "$TMP/$1.log")"
}
run two 2 32
run one 1 64
run two_again 2 32
params_close "$TMP/two.f32" "$TMP/one.f32" 1e-4 || fail "2x32 and 1x64 differ"
params_close "$TMP/two.f32" "$TMP/two_again.f32" 0 || fail "two identical sync runs differ"
echo "ok"
