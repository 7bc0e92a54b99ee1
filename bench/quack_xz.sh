#!/usr/bin/env bash
# Repack what ../shared/device/quack-prepare.sh wrote (.quack1/ and .quack2/, the CUDA 13 library wheel
# in two raw halves of 44 MiB) so that each part fits one device call beside this working tree (about
# 31 MiB with data/ in 2026-12) and the Liger wheel: the wheel is unpacked and recompressed with xz (63 MiB
# instead of 88) and split in three, and the small wheels are spread over the three parts (.quack0/,
# .quack1/, .quack2/, each at most about 27 MiB).  bench/gpu_session.sh stages each part in its own call,
# back to back while the machine is warm, and once the last one is there joins the three, extracts them
# where `pip install --target` would and installs the small wheels beside them.
#
#   bash ../shared/device/quack-prepare.sh && bash bench/quack_xz.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -f .quack1/cu13.name ] || { echo "run ../shared/device/quack-prepare.sh first" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat .quack1/cu13.part.* .quack2/cu13.part.* > "$tmp/cu13.whl"
mkdir "$tmp/u" && (cd "$tmp/u" && python3 -m zipfile -e ../cu13.whl . && tar cf - . | xz -T0 -6 > ../cu13.tar.xz)
rm .quack1/cu13.part.* .quack2/cu13.part.* .quack1/cu13.name
rm -rf .quack0 && mkdir .quack0
grep -qx "/.quack0/" .git/info/exclude 2>/dev/null || echo "/.quack0/" >> .git/info/exclude
split -n 3 -d "$tmp/cu13.tar.xz" "$tmp/cu13.xz.part."
mv "$tmp/cu13.xz.part.00" .quack0/ && mv "$tmp/cu13.xz.part.01" .quack1/ && mv "$tmp/cu13.xz.part.02" .quack2/
echo 3 > .quack0/cu13.xz.parts
# the small wheels (9 MiB together) spread so that no part passes about 27 MiB
mv .quack1/apache_tvm_ffi-* .quack1/einops-* .quack1/nvidia_cutlass_dsl-4* .quack0/
mv .quack1/torch_c_dlpack_ext-* .quack1/quack_kernels-* .quack2/
du -sh .quack0 .quack1 .quack2
