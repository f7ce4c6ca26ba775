#!/usr/bin/env bash
# The 24 GB desk (issue 36) on the GPU machine in two calls; each engine measured by desk24_gpu.py.
#
#   desk24_run.sh start-and-measure [SECONDS]   call 1: install .whl/, unpack and build both engines in the
#                                               background (mainline, then Gen B, niced), then measure what is
#                                               ready while SECONDS allow (mainline: built in about 5 min)
#   desk24_run.sh measure [SECONDS]             call 2 (within 30 s of call 1: the builds live on the machine):
#                                               wait for Gen B, measure it, then mainline again on a quiet machine
#   desk24_run.sh prebuilt LABEL TARBALL [SECONDS] [OPTIONS]
#                                               one call on a short lease: an engine built elsewhere for this GPU
#                                               (packaging/gpu-check/prebuild_genb.sh: Gen B for sm_90, built on the
#                                               CPU machine by BeeDeck's builder with pip's CUDA 13.0) unpacked and
#                                               measured at once; OPTIONS go to desk24_gpu.py (--trips 2 ...)
#   desk24_run.sh rehearse                      this CPU machine: no build, no hold; the starter engine and the
#                                               BeeLlama v0.4.3 CPU build (tests/fixtures/beellama.py) on the
#                                               synthetic pair, and the carried sources configured (dry run)
#
# Sources: .carry/mainline-b11434-src.tar.gz and .carry/beellama-v0.4.3-src.tar.gz (make_carry.sh makes them and
# .whl/). What comes back: $OUT/desk24-<label>.json and .md per engine, results.tar.gz (every console, the build
# records and logs). Work files: $BEEDECK_GPU_WORK (default /tmp/beedeck-gpu).
set -u
cd "$(dirname "$0")/../.."
W=${BEEDECK_GPU_WORK:-/tmp/beedeck-gpu}
export BEEDECK_GPU_WORK=$W BEEDECK_HOME=$W/home CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
mkdir -p "$W/out"
G=packaging/gpu-check
PY=${PY:-python3}
SOURCES=${DESK24_SOURCES:-"ml:.carry/mainline-b11434-src.tar.gz genb:.carry/beellama-v0.4.3-src.tar.gz"}  # DESK24_SOURCES: fewer
GEN_OF_ml=mainline
GEN_OF_genb=bee-b

if [ "${1:-}" != rehearse ] && [ ! -f "$W/site/.ok" ]; then  # BeeDeck's pure-Python dependencies (no network there)
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" .whl/*.whl \
    && touch "$W/site/.ok" || { echo "could not install .whl/ into $W/site"; exit 1; }
fi
[ -d "$W/site" ] && export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}

pack() {
  mkdir -p "${OUT:-$W}"
  [ -L "$W/out" ] && { ls -la "$W/out/"; return 0; }  # prebuilt: already there
  cp "$W"/out/desk24-*.json "$W"/out/desk24-*.md "${OUT:-$W}/" 2>/dev/null
  (cd "$W/out" && tar czf "${OUT:-$W}/results.tar.gz" --exclude='desk24-*.json' --exclude='desk24-*.md' .)
  ls -la "$W/out" | head -30
}
limit=${2:-560}
[ "${1:-}" = prebuilt ] && limit=${4:-380}
REHEARSE=${DESK24_REHEARSE:+--rehearse}  # DESK24_REHEARSE=1: the measure steps' own dry run on a CPU machine
left() { echo $(( limit - SECONDS )); }
measure_one() {  # measure_one LABEL NEEDED-SECONDS [LABEL-SUFFIX [OPTIONS]]: once, when its engine is built and time allows
  local label=$1 need=$2 name=$1${3:-} more=${4:-}
  [ -f "$W/out/desk24-$name.done" ] && return 0
  while [ ! -f "$W/$label.done" ] && [ "$(left)" -gt "$need" ]; do sleep 5; done
  if [ ! -f "$W/$label.engine" ]; then echo "no $label engine (yet): $(tail -3 "$W/out/build-$label.console" 2>/dev/null)"; return 1; fi
  if [ "$(left)" -lt "$need" ]; then echo "skip $name: $(left) s left, needs $need"; return 1; fi
  echo "== measure $name ($(left) s left; load $(cut -d' ' -f1-3 /proc/loadavg))"
  # shellcheck disable=SC2086  # $more and $REHEARSE are lists of options
  timeout $(( $(left) - 5 )) $PY $G/desk24_gpu.py measure --engine "$(cat "$W/$label.engine")" --label "$name" \
    --out "$W/out" $more $REHEARSE > "$W/out/measure-$name.console" 2>&1
  echo "rc $? after $SECONDS s"; tail -30 "$W/out/measure-$name.console" | cut -c1-400
  touch "$W/out/desk24-$name.done"
}

case "${1:-}" in
start-and-measure)
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; nvcc --version | tail -1; nproc
  $PY -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())'
  chain=""
  for s in $SOURCES; do  # the FlashAttention pairs each generation's recommendation needs, then its build
    label=${s%%:*}; gen_var=GEN_OF_$label
    pairs=$($PY $G/desk24_gpu.py kv-pairs --generation "${!gen_var}" 2> "$W/out/kv-pairs-$label.console")
    echo "$label: $pairs"
    chain="$chain nice -n 19 $PY $G/fullsize_gpu.py build --source ${s#*:} --label $label $pairs --out $W/out \
      > $W/out/build-$label.console 2>&1;"
  done
  setsid nohup bash -c "$chain" > /dev/null 2>&1 < /dev/null &
  measure_one ml 200
  pack ;;
measure)
  measure_one ml 200
  measure_one genb 200
  measure_one ml 120 -quiet --only-round-trips  # mainline's round trips again, with no build beside them
  pack ;;
prebuilt)
  label=$2 tarball=$3; shift 4 2>/dev/null || shift $#
  # Written straight into $OUT: a call cut off at its limit still brings back what was measured until then.
  [ -n "${OUT:-}" ] && [ ! -L "$W/out" ] && rm -rf "$W/out" && mkdir -p "$OUT" && ln -s "$OUT" "$W/out"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; nproc
  # The build folder as it was (absolute paths: its binaries find their libraries by their build RUNPATH); the
  # toolkit's cuBLAS and cudart from the machine's CUDA 13.0 (the build's own RUNPATH points at pip's copy).
  tar xJf "$tarball" -C / || { echo "cannot unpack $tarball"; exit 1; }
  bin=$(tar tJf "$tarball" | grep '/bin/llama-server$' | head -1); bin=/$bin
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ldd "$bin" | grep -E "not found|cuda|cublas" ; "$bin" --version 2>&1 | tail -3
  echo "$bin" > "$W/$label.engine"; touch "$W/$label.done"
  measure_one "$label" 60 "" "$*"
  pack ;;
rehearse)
  export PYTHONPATH=$PWD/gui:$PWD${PYTHONPATH:+:$PYTHONPATH} BEEDECK_BEELLAMA_SOURCES=${BEEDECK_BEELLAMA_SOURCES:-/work/shared/engines}
  for s in $SOURCES; do  # the carried trees unpack and configure with BeeDeck's builder (no compiling)
    $PY $G/fullsize_gpu.py dryrun --sources "${s#*:}" --out "$W/out" > "$W/out/dryrun-${s%%:*}.console" 2>&1
    echo "dry run ${s%%:*}: rc $? $(grep -c '"steps"' "$W/out/dryrun-${s%%:*}.console") plans"; tail -2 "$W/out/dryrun-${s%%:*}.console" | cut -c1-300
  done
  $PY $G/desk24_gpu.py kv-pairs --generation mainline
  $PY -c "import sys; sys.path[:0] = ['.']; from beedeck.core.starter import starter_engine; print(starter_engine())" > "$W/ml.engine"
  $PY -c "import sys; sys.path[:0] = ['.']; from tests.fixtures.beellama import ensure_engine; print(ensure_engine('bee-b').binary)" > "$W/genb.engine"
  for label in ml genb; do
    $PY $G/desk24_gpu.py measure --rehearse --engine "$(cat "$W/$label.engine")" --label "$label" --out "$W/out" \
      > "$W/out/measure-$label.console" 2>&1
    echo "rehearsal $label: rc $?"; tail -22 "$W/out/measure-$label.console"
  done
  pack ;;
*)
  echo "usage: $0 start-and-measure|measure|rehearse [SECONDS] | prebuilt LABEL TARBALL [SECONDS] [OPTIONS]"; exit 2 ;;
esac
