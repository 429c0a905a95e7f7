#!/usr/bin/env bash
# tests/integration/test_container.sh - deploy/Containerfile builds an image
# that runs a 1-server 1-worker job.
#
# Always (no container tool needed): the runtime stage installs runtime
# packages only (no -dev, compiler or build tool), every package the
# Containerfile names exists in this machine's Debian 12 archive, and every
# shared library the built programs link comes from a package the runtime
# stage installs or pulls in (dpkg -S of `ldd`, then apt-cache depends;
# the image builds with -Dmpi=disabled, so what Open MPI pulls in is exempt).
# Both images, deploy/Containerfile and its CUDA variant Containerfile.cuda,
# run as a non-root user; the CUDA one installs the CUDA runtime and cuBLAS,
# and no compiler or -dev package, in its runtime stage.
# Then, where podman, buildah or a docker daemon works here: builds the image
# and runs its default command, a 1x1 job of 1 epoch, which must end "job ok".
# Without one: skipped (77) with the reason.
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CF=$ROOT/deploy/Containerfile
runtime=$(awk '/^FROM/ {stage++} stage == 2' "$CF")
pkgs=$(echo "$runtime" | sed -n '/apt-get install/,/&&/p' | tr ' \\' '\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm|update)$')
[ -n "$pkgs" ] || fail "no apt-get install in the Containerfile's runtime stage"
bad=$(echo "$pkgs" | grep -E -- '-dev$|^(build-essential|meson|ninja-build|gcc|git|pkg-config)$')
[ -z "$bad" ] || fail "build packages in the runtime stage: $bad"
if command -v apt-cache >/dev/null; then
    for p in $pkgs; do
        apt-cache show "$p" >/dev/null 2>&1 || fail "the runtime stage names $p, which apt has not"
    done
    # What the binaries link must come with those packages.
    closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances $pkgs 2>/dev/null | grep -E '^[a-z0-9]' | sort -u)
    # The image builds with -Dmpi=disabled: what this build links for MPI
    # (the worker's --allreduce-backend mpi) is not the image's to carry.
    grep -q -- "-Dmpi=disabled" "$CF" || fail "the Containerfile does not build with -Dmpi=disabled"
    mpi_closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances libopenmpi3 2>/dev/null | grep -E '^[a-z0-9]' | sort -u)
    libs=$(for b in scheduler/shardps-scheduler server/shardps-server worker/shardps-worker \
        deploy/shardps-launch; do
        ldd "$SPS_BUILD/$b" | awk '$3 ~ /^\// {print $3}'
    done | sort -u)
    for lib in $libs; do
        owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null)
        owner=$(echo "$owner" | head -1 | cut -d: -f1)
        [ -n "$owner" ] || continue
        case $owner in libasan* | libubsan*) continue ;; esac # a sanitizer build's runtime
        echo "$closure" | grep -qx "$owner" && continue
        echo "$mpi_closure" | grep -qx "$owner" ||
            fail "the programs link $lib ($owner), which the runtime stage does not install"
    done
fi
echo "ok - runtime stage: $(echo $pkgs) (and what they depend on) cover every linked library"
for f in "$CF" "$ROOT/deploy/Containerfile.cuda"; do
    user=$(awk '/^FROM/ {stage++} stage == 2 && /^USER / {u = $2} END {print u}' "$f")
    case ${user%%:*} in "" | 0 | root) fail "${f##*/}: the image runs as root (USER '$user')" ;; esac
done
cuda_rt=$(awk '/^FROM/ {stage++} stage == 2' "$ROOT/deploy/Containerfile.cuda")
if echo "$cuda_rt" | grep -qE -- '-dev-|-dev |cuda-nvcc|build-essential|meson'; then
    fail "build packages in Containerfile.cuda's runtime stage"
fi
for p in 'cuda-cudart-${CUDA}' 'libcublas-${CUDA}' libopenblas0-pthread dataset-fashion-mnist; do
    echo "$cuda_rt" | grep -qF -- "$p" || fail "Containerfile.cuda's runtime stage does not install $p"
done
echo "ok - both images run as uid ${user%%:*}; the CUDA one carries the CUDA runtime and cuBLAS only"

tool=""
why=""
if command -v podman >/dev/null && podman info >/dev/null 2>&1; then
    tool=podman
elif command -v buildah >/dev/null && buildah info >/dev/null 2>&1; then
    tool=buildah
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    tool=docker
else
    command -v podman >/dev/null && why="podman: $(podman info 2>&1 | tail -1); " || why="no podman; "
    command -v buildah >/dev/null && why+="buildah: $(buildah info 2>&1 | tail -1); " || why+="no buildah; "
    command -v docker >/dev/null && why+="docker: $(docker info 2>&1 | grep -m1 -i 'cannot\|error')" ||
        why+="no docker"
    skip "cannot build the image here: $why"
fi
TAG=shardps-test-$$
case $tool in
buildah) build=(buildah bud -t "$TAG" -f "$CF" "$ROOT") ;;
*) build=("$tool" build -t "$TAG" -f "$CF" "$ROOT") ;;
esac
timeout 1800 "${build[@]}" >"$TMP/build.log" 2>&1 || {
    grep -qiE 'temporary failure resolving|could not resolve|network is unreachable' "$TMP/build.log" &&
        skip "$tool build needs the Debian archive, unreachable here: $(grep -m1 -iE 'resolv|unreachable' "$TMP/build.log")"
    fail "$tool build failed: $(tail -5 "$TMP/build.log")"
}
case $tool in
buildah)
    c=$(buildah from "$TAG") && timeout 600 buildah run "$c" -- shardps-launch --servers 1 \
        --workers 1 --epochs 1 >"$TMP/run.log" 2>&1
    rc=$?
    buildah rm "$c" >/dev/null 2>&1
    ;;
*)
    timeout 600 "$tool" run --rm "$TAG" >"$TMP/run.log" 2>&1
    rc=$?
    ;;
esac
"${tool}" rmi "$TAG" >/dev/null 2>&1
[ $rc -eq 0 ] && grep -q "^job ok" "$TMP/run.log" ||
    fail "the image's 1x1 job failed ($rc): $(tail -5 "$TMP/run.log")"
echo "ok: $tool built deploy/Containerfile; its 1x1 job: $(grep -o 'test_accuracy=[0-9.]*' "$TMP/run.log" | tail -1)"
