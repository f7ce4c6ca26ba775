#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages BeeDeck needs that a bare system may lack: a compiler and
# CMake for the starter engine, venv support, and the libraries Qt loads (offscreen and xcb).
# Prints what it does; installs nothing that is already there; never fails on a non-Debian system.
set -euo pipefail
# build: the starter engine and BeeLlama from source; package: `make dist` and its install test
# (dpkg-deb, desktop-file-validate, appstreamcli, a virtual X server); runtime: what Qt loads, the
# list the .deb declares in Depends (packaging/build_dist.py).
build=(build-essential cmake ninja-build git python3-venv)
package=(dpkg-dev desktop-file-utils appstream xvfb xauth)
runtime=(libglib2.0-0 libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3
         libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0
         libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libx11-xcb1 libgomp1)
pkgs=("${build[@]}" "${package[@]}" "${runtime[@]}")
command -v dpkg-query >/dev/null 2>&1 || { echo "not a Debian-based system: install the equivalents of: ${pkgs[*]}"; exit 0; }
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# test: the coding-agent tests install their clients with npm (a Node.js from elsewhere that brings its
# own npm is fine: only a missing npm command asks for Debian's).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing system packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
  echo "need root to install: ${missing[*]} (run: sudo apt-get install ${missing[*]})"; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
