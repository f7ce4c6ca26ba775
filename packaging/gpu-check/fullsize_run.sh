#!/usr/bin/env bash
# The full-size GPU run in lease-sized pieces: `fullsize_run.sh start` (the Gen B build and the
# configure-only dry runs, in the background), then `fullsize_run.sh measure SECONDS` as often as
# needed: it waits for the build, runs each measurement not yet done while SECONDS allow, and packs
# what exists into $OUT/results.tar.gz. Work files: $BEEDECK_GPU_WORK (default /tmp/beedeck-gpu).
set -u
cd "$(dirname "$0")/../.."
W=${BEEDECK_GPU_WORK:-/tmp/beedeck-gpu}
export BEEDECK_GPU_WORK=$W BEEDECK_HOME=$W/home CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$W/out"
G=packaging/gpu-check
pack() { (cd "$W/out" && tar czf "${OUT:-$W}/results.tar.gz" --exclude='servers.log' . ) ; ls -la "$W/out" "$W/out"/* 2>/dev/null | head -40; }

if [ "${1:-}" = start ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvcc --version | tail -1; nproc
  setsid nohup python3 $G/fullsize_gpu.py build --source .carry/beellama-v0.4.3-src.tar.gz --label genb \
    --out "$W/out" > "$W/out/build.console" 2>&1 < /dev/null &
  sleep 30
  setsid nohup python3 $G/fullsize_gpu.py dryrun --sources .carry/beellama-v0.4.3-src.tar.gz \
    .carry/beellama-v0.1.2-src.tar.gz .carry/mainline-b11434-src.tar.gz --out "$W/out" \
    > "$W/out/dryrun.console" 2>&1 < /dev/null &
  exit 0
fi

limit=${2:-540}
left() { echo $(( limit - SECONDS )); }
while [ ! -f "$W/genb.done" ] && [ "$(left)" -gt 20 ]; do sleep 5; done
tail -2 "$W/out/build.console"
if [ ! -f "$W/genb.engine" ]; then echo "no engine yet (build running or failed)"; pack; exit 0; fi
ENG=$(cat "$W/genb.engine")
run() {  # run NAME SECONDS-NEEDED COMMAND...: once, when the time left allows
  local name=$1 need=$2; shift 2
  if [ -f "$W/out/$name.done" ]; then return; fi
  if [ "$(left)" -lt "$need" ]; then echo "skip $name: $(left) s left, needs $need"; return; fi
  echo "== $name ($(left) s left)"; timeout $(( $(left) - 10 )) "$@" > "$W/out/$name.console" 2>&1
  echo "rc $? after $SECONDS s"; tail -3 "$W/out/$name.console" | cut -c1-600; touch "$W/out/$name.done"
}
run toggle 170 python3 $G/fullsize_gpu.py toggle --engine "$ENG" --pair gemma4-q4km --variants guide,mmap,fast --out "$W/out"
run plan32k 60 python3 $G/split_gpus.py --engine "$ENG" --meta gemma4 --no-synthetic --placements gpu0 \
  --ctx 32768 --reps 2 --max-tokens 128 --out "$W/out/plan32k"
run plan62k 60 python3 $G/split_gpus.py --engine "$ENG" --meta gemma4 --no-synthetic --placements gpu0 \
  --ctx 62208 --kv q8_0 --ubatch 512 --reps 2 --max-tokens 128 --out "$W/out/plan62k"
run sweep 120 python3 $G/fullsize_gpu.py sweep --engine "$ENG" --pairs gemma4-q4km --n-max 1 2 4 8 12 16 --out "$W/out"
run qwen 60 python3 $G/split_gpus.py --engine "$ENG" --meta qwen36 --no-synthetic --placements gpu0 \
  --ctx 32768 --reps 2 --max-tokens 128 --out "$W/out/qwen32k"
run toggle_q4ks 90 python3 $G/fullsize_gpu.py toggle --engine "$ENG" --pair gemma4-q4ks --variants fast --out "$W/out"
pack
