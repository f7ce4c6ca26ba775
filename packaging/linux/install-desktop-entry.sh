#!/usr/bin/env bash
# Adds BeeDeck to the desktop's application menu for the current user (double-click start).
# Usage: packaging/linux/install-desktop-entry.sh [PATH_TO_beedeck-gui]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exe="${1:-$repo/.venv/bin/beedeck-gui}"
[ -x "$exe" ] || { echo "no BeeDeck launcher at $exe: run 'make run' once first, or pass the path"; exit 1; }
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/scalable/apps"
mkdir -p "$apps" "$icons"
cp "$repo/resources/icons/beedeck.svg" "$icons/io.github.beedeck.BeeDeck.svg"
sed -e "s|^Exec=.*|Exec=\"$exe\"|" -e "s|^TryExec=.*|TryExec=$exe|" \
    "$here/io.github.beedeck.BeeDeck.desktop" > "$apps/io.github.beedeck.BeeDeck.desktop"
command -v update-desktop-database >/dev/null && update-desktop-database "$apps" || true
echo "installed: $apps/io.github.beedeck.BeeDeck.desktop"
