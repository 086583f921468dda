#!/usr/bin/env bash
# Packs what bench/gpu.sh needs on the device machine (no network, no registry, 64 MiB of
# carried files) into build-gpu-pack.tar.xz: the CUDA flavour's nestpipe and GPU tests
# (bash .ci/build-cuda first), the source-built StarPU's libraries, and every other shared
# library they load (ldd), stripped; not glibc and not CUDA's own libraries (cudart, cuBLAS,
# NCCL, the driver), which the device machine's toolkit provides. Then, from the
# repository root:
#
#   bash bench/gpu-pack.sh                   # here, after bash .ci/build-cuda
#   bash bench/gpu.sh build-gpu-pack.tar.xz  # there (carry build-gpu-pack.tar.xz)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${BUILD:-build-cuda}
P=build-gpu-pack
[[ -x $B/nestpipe ]] || { echo "gpu-pack.sh: no $B/nestpipe; run bash .ci/build-cuda" >&2; exit 1; }
rm -rf "$P" "$P.tar.xz"
mkdir -p "$P/bin" "$P/lib"
bins=("$B/nestpipe")
for t in test_cuda_kernels test_engine_gpu test_kernels test_layers; do
  [[ -x $B/tests/$t ]] && bins+=("$B/tests/$t")
done
cp "${bins[@]}" "$P/bin/"
# libraries: everything ldd resolves but glibc's and CUDA's
keep() { ! grep -qE '/(libc|libm|libdl|libpthread|librt|libresolv)\.so|ld-linux|libcuda|libcudart|libcublas|libcusparse|libnvJitLink|libnccl|libnvrtc' <<<"$1"; }
for f in "${bins[@]}"; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  if keep "$lib"; then cp -L "$lib" "$P/lib/"; fi
done
chmod u+w "$P"/lib/* "$P"/bin/*
strip --strip-unneeded "$P"/lib/* "$P"/bin/* 2>/dev/null || true
# the StarPU tools' config is not needed; its perf models start empty there (dmda calibrates)
git rev-parse --short HEAD >"$P/commit" 2>/dev/null || echo unknown >"$P/commit"
tar -C "$P" -cf - . | xz -T "$(nproc)" -6 >"$P.tar.xz"
size=$(stat -c %s "$P.tar.xz")
echo "gpu-pack.sh: $P.tar.xz, $((size / 1024 / 1024)) MiB ($(ls "$P/lib" | wc -l) libraries, $(ls "$P/bin" | wc -l) programs)"
(( size < 60 * 1024 * 1024 )) || { echo "gpu-pack.sh: over the 64 MiB the device machine takes" >&2; exit 1; }
