#!/usr/bin/env bash
# Installs, with apt-get, everything shardps needs to build, test and run on
# Debian 12: compilers and Meson, libzmq, protobuf-c (+ protoc-c), OpenBLAS,
# zlib, jansson (JSON files), libmicrohttpd (the metrics endpoint), Check, the Fashion-MNIST
# dataset, gnuplot (shardps-bench's and the launcher's PNG plots), OpenMPI
# (shardps-bench's MPI_Allreduce reference, and shardps-mpi), prometheus (its
# promtool checks the metrics in the tests), and Slurm with munge (about 3 MB:
# tests/integration/test_slurm.sh runs deploy/slurm/shardps.sbatch on a private
# single-node Slurm). Idempotent: a package
# that is already installed is not touched, and apt-get is not called at all
# when nothing is missing. The CUDA toolkit is optional and not installed here.
#
#   usage: deploy/install-deps.sh [--with-torch]
# --with-torch also installs Debian's PyTorch (python3-torch, about 600 MB with
# its dependencies), optional: only `shardps-bench compute --torch` uses it.
set -euo pipefail

with_torch=0
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    *) echo "usage: $0 [--with-torch]" >&2; exit 2 ;;
  esac
done

pkgs=(
  build-essential pkg-config meson ninja-build
  libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
  libopenblas-dev zlib1g-dev libjansson-dev libmicrohttpd-dev check
  iproute2 python3 python3-yaml
  dataset-fashion-mnist
  gnuplot-nox openmpi-bin libopenmpi-dev prometheus
  slurmd slurmctld slurm-client munge
)
if [ "$with_torch" = 1 ]; then
  pkgs+=(python3-torch)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
