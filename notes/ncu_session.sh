#!/usr/bin/env bash
# Nsight Compute on the probes of notes/probe_ncu.py (the launches of two calls after warm-up,
# at most LAB_NCU_COUNT of them), text reports under $OUT.
#   LAB_NCU="rope rope_compile" bash notes/ncu_session.sh
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TRITON_CACHE_DIR=/tmp/triton-cache
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
--section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats"
for probe in ${LAB_NCU:-ce_loss ce_step rms_bwd}; do
  echo "=== $probe $(date -u +%T)"
  timeout ${LAB_NCU_S:-150} ncu --clock-control none --target-processes all --profile-from-start off \
    --launch-count ${LAB_NCU_COUNT:-8} $sections python3 notes/probe_ncu.py $probe > "$out/ncu-$probe.txt" 2>&1
  grep -E "^\s+(row_|_bwd|[a-z_]+kernel|triton_)|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|Stall|Executed Ipc|Block Size|Grid Size|L2 Hit" "$out/ncu-$probe.txt" | head -60
done
