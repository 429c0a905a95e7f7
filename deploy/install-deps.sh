#!/usr/bin/env bash
# Installs, with apt-get, what shardps needs on Debian 12, in two sets:
#
#   run   building and running a job: compilers, Meson and Ninja, libzmq,
#         protobuf-c (+ protoc-c), OpenBLAS, zlib, jansson (JSON files),
#         libmicrohttpd (the metrics endpoint), the Fashion-MNIST dataset and
#         gnuplot (the launcher's PNG plots). deploy/quickstart.sh installs
#         these alone.
#   test  the tests and the benchmarks besides: Check (the unit tests),
#         Python with PyYAML, iproute2 (network namespaces), bc and curl,
#         OpenMPI (shardps-mpi, and the bench's MPI_Allreduce reference),
#         Prometheus (its promtool checks the metrics) and Slurm with munge
#         (about 3 MB: test_slurm.sh runs deploy/slurm/shardps.sbatch on a
#         private single-node Slurm).
#
#   usage: deploy/install-deps.sh [--run | --test] [--with-torch] [--print]
# --run installs the first set; --test (the default) both; --print only
# prints the set's packages, one line, and installs nothing. --with-torch also
# installs Debian's PyTorch (python3-torch, about 600 MB with its
# dependencies), optional: only `shardps-bench compute --torch` uses it.
# Idempotent: a package that is already installed is not touched, and
# apt-get is not called at all when nothing is missing. The CUDA toolkit is
# optional and not installed here.
set -euo pipefail

run_pkgs=(
  build-essential pkg-config meson ninja-build
  libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
  libopenblas-dev zlib1g-dev libjansson-dev libmicrohttpd-dev
  dataset-fashion-mnist gnuplot-nox
)
test_pkgs=(
  check python3 python3-yaml iproute2 bc curl
  openmpi-bin libopenmpi-dev prometheus
  slurmd slurmctld slurm-client munge
)

set_name=test
with_torch=0
print=0
for arg in "$@"; do
  case "$arg" in
    --run) set_name=run ;;
    --test) set_name=test ;;
    --with-torch) with_torch=1 ;;
    --print) print=1 ;;
    *) echo "usage: $0 [--run | --test] [--with-torch] [--print]" >&2; exit 2 ;;
  esac
done

pkgs=("${run_pkgs[@]}")
what="to build and run shardps"
if [ "$set_name" = test ]; then
  pkgs+=("${test_pkgs[@]}")
  what="to build, run and test shardps"
fi
if [ "$with_torch" = 1 ]; then
  pkgs+=(python3-torch)
fi
if [ "$print" = 1 ]; then
  echo "${pkgs[*]}"
  exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything $what is installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: $what, installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
