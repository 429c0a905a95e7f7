#!/usr/bin/env bash
# Sets up (Debian packages), builds, and runs the main job: a local cluster of
# 2 servers and 2 workers training the MLP on Fashion-MNIST for 10 epochs.
# Extra arguments go to shardps-launch and override the defaults, e.g.
#   ./deploy/quickstart.sh --mode async --epochs 1
set -euo pipefail
cd "$(dirname "$0")/.."
# Meson looks for nvcc (and nvlink) on PATH only: add the toolkit's usual home.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
./deploy/install-deps.sh
[ -f build/build.ninja ] || meson setup build
meson compile -C build
exec build/deploy/shardps-launch --servers 2 --workers 2 --model mlp --epochs 10 \
    --summary build/summary.json "$@"
