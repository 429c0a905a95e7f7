#!/usr/bin/env bash
# deploy/gpu-bundle.sh - packs a CUDA build of shardps for a GPU machine that
# has the NVIDIA driver, CUDA and cuBLAS (and cuDNN, for a build with it:
# in CUDA's lib64 or a PyTorch's nvidia/cudnn) but none of the Debian libraries we
# link (ZeroMQ, protobuf-c, OpenBLAS, jansson and what they pull in).
#
#   usage: deploy/gpu-bundle.sh BUILD_DIR [--with-data] [--with-torch] [--xz]
#
# Writes, into .gpu/ at the repository root (git ignores it; rewritten each time):
#   bin/<path in BUILD_DIR>  every executable of the build, debug info stripped,
#                            in the build's layout (so the launcher finds the roles)
#   lib/                     each shared library they need (ldd) that such a
#                            machine lacks: all but the C/C++ runtime and the
#                            NVIDIA/CUDA libraries
#   data/fashion-mnist/      --with-data: the dataset ($SHARDPS_DATA or Debian's)
#   torch/                   --with-torch: our PyTorch reference (bench/torch/)
#   env.sh                   sets LD_LIBRARY_PATH (lib/ and the machine's CUDA
#                            libraries, found there, saying where it found
#                            cuDNN) and SHARDPS_DATA
# --xz packs all of it into .gpu/bundle.tar.xz instead (a fifth of the size),
# for a copy to a machine under a size limit. Prints the command prefix to run
# things from the bundle.
set -euo pipefail

die() {
    echo "gpu-bundle: $*" >&2
    exit 1
}

[ $# -ge 1 ] || die "usage: $0 BUILD_DIR [--with-data] [--with-torch] [--xz]"
build=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
shift
with_data=0 with_torch=0 xz=0
for arg in "$@"; do
    case "$arg" in
    --with-data) with_data=1 ;;
    --with-torch) with_torch=1 ;;
    --xz) xz=1 ;;
    *) die "unknown argument $arg" ;;
    esac
done
command -v ldd >/dev/null || die "ldd not found"
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"

# What the GPU machine has itself: the C and C++ runtime, the driver, CUDA.
have='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnvidia|libnvrtc|libcurand|libcusparse|libcusolver|libcufft|libnccl|libcudnn)\.so'
cuda='^lib(cudart|cublas|cublasLt|cudnn)\.so' # those the machine has, looked up there by env.sh
declare -A cuda_needed=()
n_exe=0
while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f")" = $'\x7fELF' ] || continue
    rel=${f#"$build"/}
    mkdir -p "$out/bin/$(dirname "$rel")"
    strip --strip-debug -o "$out/bin/$rel" "$f" 2>/dev/null || cp "$f" "$out/bin/$rel"
    n_exe=$((n_exe + 1))
    while read -r name path; do
        if [[ $name =~ $cuda ]]; then
            cuda_needed[$name]=1
        elif [[ ! $name =~ $have ]] && [ ! -e "$out/lib/$name" ]; then
            [ -e "$path" ] || die "$rel needs $name, which ldd does not find here"
            cp -L "$path" "$out/lib/$name"
        fi
    done < <(ldd "$f" | awk '$2 == "=>" {print $1, $3}')
done < <(find "$build" -type f -perm -u+x ! -path '*/meson-*' ! -path '*.p/*' -print0)
[ "$n_exe" -gt 0 ] || die "no executables under $build"

if [ "$with_data" = 1 ]; then
    data=${SHARDPS_DATA:-/usr/share/datasets/fashion-mnist}
    [ -d "$data" ] || die "no dataset at $data (Debian: dataset-fashion-mnist)"
    mkdir -p "$out/data"
    cp -r "$data" "$out/data/fashion-mnist"
fi
if [ "$with_torch" = 1 ]; then
    mkdir -p "$out/torch"
    cp "$root"/bench/torch/*.py "$out/torch/"
fi

# env.sh looks for the CUDA libraries on the machine it runs on: the CUDA
# toolkit's directories, then a pip-installed PyTorch's nvidia/*/lib (cuDNN:
# nvidia/cudnn/lib, wherever python3 imports nvidia.cudnn from). cuDNN loads
# its other parts (libcudnn_cnn ...) from its own folder, so that folder is
# enough, and env.sh says which it took.
{
    echo "# Source me: . .gpu/env.sh (written by deploy/gpu-bundle.sh)"
    echo "SPS_BUNDLE=\$(cd \"\$(dirname \"\${BASH_SOURCE[0]}\")\" && pwd)"
    echo "sps_cuda_libs=\"${!cuda_needed[*]}\""
    cat <<'EOF'
sps_path=$SPS_BUNDLE/lib
for sps_lib in $sps_cuda_libs; do
    for sps_dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/lib/x86_64-linux-gnu $(python3 -c 'import glob, site
print(" ".join(d for s in site.getsitepackages() for d in glob.glob(s + "/nvidia/*/lib")))' 2>/dev/null) \
        $(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + "/lib")' 2>/dev/null); do
        if [ -e "$sps_dir/$sps_lib" ]; then
            case ":$sps_path:" in *":$sps_dir:"*) ;; *) sps_path=$sps_path:$sps_dir ;; esac
            case $sps_lib in libcudnn.*) echo "gpu-bundle env.sh: cuDNN from $sps_dir" >&2 ;; esac
            continue 2
        fi
    done
    echo "gpu-bundle env.sh: $sps_lib not found on this machine" >&2
done
export LD_LIBRARY_PATH=$sps_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -d "$SPS_BUNDLE/data/fashion-mnist" ]; then
    export SHARDPS_DATA=$SPS_BUNDLE/data/fashion-mnist
fi
unset sps_path sps_lib sps_dir sps_cuda_libs
EOF
} >"$out/env.sh"

n_lib=$(find "$out/lib" -type f | wc -l)
if [ "$xz" = 1 ]; then
    parts=(bin lib env.sh)
    [ "$with_data" = 0 ] || parts+=(data)
    [ "$with_torch" = 0 ] || parts+=(torch)
    tar -cf - -C "$out" "${parts[@]}" | xz -T0 -2 >"$out/bundle.tar.xz"
    (cd "$out" && rm -rf "${parts[@]}")
    prefix='mkdir -p /tmp/sps && tar -xJf .gpu/bundle.tar.xz -C /tmp/sps && . /tmp/sps/env.sh &&'
    where=/tmp/sps
else
    prefix='. .gpu/env.sh &&'
    where=.gpu
fi
echo "gpu-bundle: .gpu/ ($(du -sm "$out" | cut -f1) MiB): $n_exe executables, $n_lib libraries$(
    [ "$with_data" = 0 ] || echo ", the dataset")$([ "$with_torch" = 0 ] || echo ", the PyTorch reference")" >&2
[ -z "${!cuda_needed[*]}" ] || echo "gpu-bundle: env.sh looks up ${!cuda_needed[*]} on the GPU machine" >&2
echo "gpu-bundle: from the repository root, run with this prefix (binaries under $where/bin):" >&2
echo "$prefix"
