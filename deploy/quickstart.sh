#!/usr/bin/env bash
# Sets up (the Debian packages a run needs, not the tests': install-deps.sh
# --run says which it installs), builds (without the tests), and runs the main
# job: a local cluster of 2 servers and 2 workers training the MLP on
# Fashion-MNIST for 10 epochs.
# Extra arguments go to shardps-launch and override the defaults, e.g.
#   ./deploy/quickstart.sh --mode async --epochs 1
set -euo pipefail
cd "$(dirname "$0")/.."
# Meson looks for nvcc (and nvlink) on PATH only: add the toolkit's usual home.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
./deploy/install-deps.sh --run
# the tests need Check, a test dependency: deploy/run-tests.sh turns them on
[ -f build/build.ninja ] || meson setup build -Dtests=false
meson compile -C build
exec build/deploy/shardps-launch --servers 2 --workers 2 --model mlp --epochs 10 \
    --summary build/summary.json "$@"
