#!/bin/sh
# Installs the unpacked BeeDeck folder for this user: a `beedeck` command in ~/.local/bin and the menu
# entry with its icon. Run it from the unpacked tarball: ./install.sh  (./install.sh --remove undoes it;
# your chats, models and engines in ~/.local/share/beedeck are never touched).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
id=io.github.beedeck.BeeDeck
bin="$HOME/.local/bin"; apps="$HOME/.local/share/applications"; icons="$HOME/.local/share/icons/hicolor"
if [ "${1:-}" = "--remove" ]; then
  rm -f "$bin/beedeck" "$apps/$id.desktop" "$icons/256x256/apps/$id.png" "$icons/scalable/apps/$id.svg"
  echo "BeeDeck's command and menu entry are removed (its data is kept)."; exit 0
fi
mkdir -p "$bin" "$apps" "$icons/256x256/apps" "$icons/scalable/apps"
ln -sf "$here/beedeck/beedeck" "$bin/beedeck"
sed "s|^Exec=beedeck|Exec=$here/beedeck/beedeck|; s|^TryExec=beedeck|TryExec=$here/beedeck/beedeck|" \
  "$here/$id.desktop" > "$apps/$id.desktop"
cp "$here/$id.png" "$icons/256x256/apps/$id.png"
cp "$here/$id.svg" "$icons/scalable/apps/$id.svg"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$apps" || true
echo "BeeDeck is in your application menu; the command is $bin/beedeck."
