#!/usr/bin/env bash
# tests/gpu/emu/run.sh - runs the gpu suite (tests/gpu/test_cuda.c) against a
# host emulation of CUDA + cuBLAS + cuDNN (emu.cc), with ASan + UBSan, on a machine
# with no GPU. It checks the CUDA backend's logic (indexing, reductions,
# cuBLAS argument layout, chunking, which pointers are device pointers), not
# its numerics or stream timing: the real run is on a GPU. Needs g++, gcc,
# python3 and the Debian -dev packages of the CPU build (jansson included). Optional dev tool; not
# part of the Meson build.
#   usage: tests/gpu/emu/run.sh [OUT_DIR]     (default build-emu)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/build-emu}
emu=$root/tests/gpu/emu
mkdir -p "$out/gen" "$out/obj"
rm -f "$out"/obj/*.o
# .cu (and cuda_impl.h) -> C++: k<<<grid, block, shm, stream>>>(args); becomes EMU_LAUNCH(...)
# (EMU_LAUNCH_T(k, T, ...) for a template's instance k<T>), and every
# __global__ function whose body calls __syncthreads is listed.
python3 - "$root" "$out/gen" <<'PY'
import glob, os, re, sys
root, gen = sys.argv[1], sys.argv[2]
sync = []
# cuda_impl.h's launch macro too: its copy in gen/ shadows the original
for cu in sorted(glob.glob(os.path.join(root, 'kernels/cuda/*.cu'))) + [
        os.path.join(root, 'kernels/cuda/cuda_impl.h')]:
    s = open(cu).read()
    for m in re.finditer(r'__global__[^;{]*?\b(\w+)\s*\([^)]*\)\s*\{', s, flags=re.S):
        depth, i = 1, m.end()
        while depth:
            depth += {'{': 1, '}': -1}.get(s[i], 0)
            i += 1
        if '__syncthreads' in s[m.end():i]:
            sync.append(m.group(1))
    s = re.sub(r'(\w+)(?:<([\w ]*)>)?\s*<<<(.*?)>>>\s*\((.*?)\);',
               lambda m: ('EMU_LAUNCH_T(%s, %s, %s, %s);' % m.groups() if m.group(2) else
                          'EMU_LAUNCH(%s, %s, %s);' % (m.group(1), m.group(3), m.group(4))),
               s, flags=re.S)
    assert '<<<' not in s, cu
    if cu.endswith('.h'):
        os.makedirs(os.path.join(gen, 'kernels/cuda'), exist_ok=True)
        open(os.path.join(gen, 'kernels/cuda', os.path.basename(cu)), 'w').write(s)
    else:
        open(os.path.join(gen, os.path.basename(cu)[:-3] + '.cc'), 'w').write(s)
open(os.path.join(gen, 'emu_sync.h'), 'w').write(
    '#define EMU_SYNC_KERNELS ' + ', '.join('"%s"' % k for k in sync) + '\n')
print('emulating; kernels with barriers:', ', '.join(sync))
PY
san="-fsanitize=address,undefined -fno-omit-frame-pointer"
# -DPS_HAVE_CUDNN: built as with cuDNN, so the suite runs its convolutions
# both ways (kernels/cuda/dnn.cu against the emulation's direct loops).
flags="-DPS_HAVE_CUDNN -g -O1 $san -I$emu/include -I$out/gen -I$root $(pkg-config --cflags openblas check jansson)"
# Index kernels take their 32-bit path up to 2^16 elements here, not 2^31,
# so the suite's shapes run both paths (kernels/cuda/cuda_impl.h).
for f in "$out"/gen/*.cc "$emu/emu.cc"; do
    g++ -std=c++17 -Wall -Wextra -Wno-unused-parameter -DPS_CUDA_IDX32_MAX=65536 $flags -c "$f" \
        -o "$out/obj/$(basename "$f").o"
done
cd "$root"
# The CPU reference is built without its AVX-512 files (no PS_HAVE_AVX512):
# the plain OpenBLAS path is enough to compare against. PS_GPU_EMU tells the
# suite its fused dense layers must give the separate ops' bits here.
for f in kernels/*.c $(ls kernels/cpu/*.c | grep -v _avx512) kernels/cuda/*.c common/*.c \
         worker/data.c $(ls worker/models/*.c | grep -v bench) tests/gpu/test_cuda.c tests/unit/modelcheck.c; do
    gcc -std=c11 -D_GNU_SOURCE -DPS_HAVE_CUDA -DPS_GPU_EMU -Wall -Wextra -Wno-missing-field-initializers $flags -c "$f" \
        -o "$out/obj/$(echo "$f" | tr / _).o"
done
g++ $san -o "$out/test_cuda_emu" "$out"/obj/*.o $(pkg-config --libs openblas check zlib jansson libmicrohttpd) \
    -lm -lpthread
# coroutine stacks confuse LeakSanitizer; Check's own timeouts are too short
# for emulated kernels (slow, and slower on a busy machine)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OPENBLAS_NUM_THREADS=1
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-100}
"$out/test_cuda_emu" 2>&1 | grep -v "ASan doesn't fully support makecontext"
exit "${PIPESTATUS[0]}"
