#!/usr/bin/env bash
# Builds shardps (if needed) and runs every test: unit (Check), integration
# (real processes on loopback and in network namespaces), gpu (skipped
# without a GPU). Extra arguments go to `meson test`. With --sanitize the
# build is made in build-asan with AddressSanitizer + UBSan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# Meson looks for nvcc (and nvlink) on PATH only: add the toolkit's usual home.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
./deploy/install-deps.sh
dir=build
opts=()
if [ "${1:-}" = "--sanitize" ]; then
    shift
    dir=build-asan
    opts=(-Db_sanitize=address,undefined -Db_lundef=false)
fi
if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" -Dtests=true # a build dir the quickstart made has them off
else
    meson setup "$dir" "${opts[@]}"
fi
meson compile -C "$dir"
exec meson test -C "$dir" --print-errorlogs "$@"
