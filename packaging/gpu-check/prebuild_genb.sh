#!/usr/bin/env bash
# BeeLlama Gen B (v0.4.3) built for the GPU machine's H100/H200 (sm_90) on this CPU machine, so that a short lease
# only measures it (desk24_run.sh prebuilt): the device's lease is 30 minutes and Gen B's build there takes 8-10.
#
#   packaging/gpu-check/prebuild_genb.sh     (~60 min on 2 cores, niced; needs pip's network here)
#
# The compiler is pip's CUDA 13.0 (the machine's driver and toolkit are 13.0: 580.x): nvcc, crt, nvvm, cudart,
# cuBLAS and CCCL wheels, at the versions of that toolkit. The driver library is linked against a stub made from
# cuda.h's names (the machine's real libcuda.so.1 is used there). BeeDeck's own builder configures and compiles:
# the FlashAttention pairs Gen B's 24 GB recommendation needs (K/V q8_0/q8_0: the default set), GGML_NATIVE off
# (the machine's CPU is not this one). Its smoke test fails here (no GPU, no driver); the GPU call runs the binary.
# Out: the build's bin/ folder with its absolute paths (its RUNPATH), xz'd (79 MB: libggml-cuda.so is 117 MB of
# compressed SASS and PTX) and cut in two under the 64 MiB a call carries: .carry1/genb-cuda90.part1 (40 MiB, call
# 1 copies it to /tmp there) and .carry/genb-cuda90.part2 with its sha256 (call 2 joins and checks them);
# .carry1 must be ignored by git (.git/info/exclude) or it travels with every call.
set -eu
cd "$(dirname "$0")/../.."
W=${PREBUILD_WORK:-/tmp/genb}
SOURCES=${BEEDECK_BEELLAMA_SOURCES:-/work/shared/engines}
PY=${PY:-.venv/bin/python}
CU=$W/cu13/nvidia/cu13
mkdir -p "$W" .carry
if [ ! -x "$CU/bin/nvcc" ]; then
  $PY -m pip install -q --target "$W/cu13" nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cublas==13.0.2.14 nvidia-cuda-cccl==13.0.85 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
fi
(cd "$CU/lib" && ln -sf libcudart.so.13 libcudart.so && ln -sf libcublas.so.13 libcublas.so \
  && ln -sf libcublasLt.so.13 libcublasLt.so && mkdir -p stubs)
$PY - "$CU" <<'PYEOF'
import re, sys
cu = sys.argv[1]
src = open(f"{cu}/include/cuda.h").read()
names = set(re.findall(r"\b(cu[A-Z][A-Za-z0-9_]*)\s*\(", src))
names |= set(re.findall(r"#define\s+cu[A-Za-z0-9_]+\s+(cu[A-Za-z0-9_]+)", src))
open(f"{cu}/lib/stubs/stub.c", "w").write("".join(f"void {n}(void){{}}\n" for n in sorted(names)))
PYEOF
gcc -shared -fPIC -o "$CU/lib/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$CU/lib/stubs/stub.c"
[ -d "$W/beellama-v0.4.3" ] || tar xzf "$SOURCES/beellama-v0.4.3-src.tar.gz" -C "$W"
# LD_LIBRARY_PATH: the linker finds libggml-cuda's own libraries (cuBLAS, the stub) through it when it links
# llama-server; without it the last link fails with "undefined reference to cublas...@libcublas.so.13".
export PATH=$CU/bin:$PATH CUDA_HOME=$CU LIBRARY_PATH=$CU/lib/stubs:$CU/lib LD_LIBRARY_PATH=$CU/lib:$CU/lib/stubs
PYTHONPATH=gui nice -n 19 $PY - "$W" <<'PYEOF'
import json, sys, time
from pathlib import Path
from beedeck.core.engine.building import build_engine
from beedeck.core.engine.registry import EngineRegistry
w = Path(sys.argv[1])
t0 = time.monotonic()
r = build_engine(str(w / "beellama-v0.4.3"), gpus=[(9, 0)], cpu_only=False, driver_cuda="13.0",
                 cache_pairs=[("f16", "f16"), ("q8_0", "q8_0")], native=False,
                 registry=EngineRegistry(root=w / "registry"))
print(json.dumps({"binary": str(r.binary), "options": r.options, "steps": r.planned_steps,
                  "seconds": round(time.monotonic() - t0), "smoke": str(r.smoke)}, indent=1))
(w / "genb.engine").write_text(str(r.binary))
PYEOF
bin=$(cat "$W/genb.engine")
tar cJf "$W/genb-cuda90.tar.xz" -P --exclude='*.a' "$(dirname "$bin")"
sha256sum "$W/genb-cuda90.tar.xz" | cut -d' ' -f1 > .carry/genb-cuda90.sha256
mkdir -p .carry1 && split -b 41943040 "$W/genb-cuda90.tar.xz" "$W/part."
mv "$W/part.aa" .carry1/genb-cuda90.part1 && mv "$W/part.ab" .carry/genb-cuda90.part2
git check-ignore -q .carry1 || { mkdir -p .git/info && echo /.carry1/ >> .git/info/exclude; }
du -sh .carry1 .carry
