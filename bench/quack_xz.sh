#!/usr/bin/env bash
# Repack what ../shared/device/quack-prepare.sh wrote (.quack1/ and .quack2/, the CUDA 13 library wheel
# in two raw halves of 44 MiB) so that each half fits one device call beside this working tree (about
# 20 MiB) and the Liger wheel: the wheel is unpacked and recompressed with xz (63 MiB instead of 88) and
# split in two.  bench/gpu_session.sh stages .quack1 in one call, and in the call right after (while the
# machine is warm) joins .quack2's half to it, extracts it where `pip install --target` would and
# installs the small wheels beside it.
#
#   bash ../shared/device/quack-prepare.sh && bash bench/quack_xz.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -f .quack1/cu13.name ] || { echo "run ../shared/device/quack-prepare.sh first" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat .quack1/cu13.part.* .quack2/cu13.part.* > "$tmp/cu13.whl"
mkdir "$tmp/u" && (cd "$tmp/u" && python3 -m zipfile -e ../cu13.whl . && tar cf - . | xz -T0 -6 > ../cu13.tar.xz)
rm .quack1/cu13.part.* .quack2/cu13.part.* .quack1/cu13.name
split -n 2 -d "$tmp/cu13.tar.xz" .quack1/cu13.xz.part.
mv .quack1/cu13.xz.part.01 .quack2/
echo 2 > .quack1/cu13.xz.parts
du -sh .quack1 .quack2
