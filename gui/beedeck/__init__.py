"""BeeDeck: a desktop app that runs a local coding model fast (llama-server + DFlash)."""

__version__ = "0.1.0"
APP_ID = "io.github.beedeck.BeeDeck"
APP_NAME = "beedeck"
APP_DISPLAY_NAME = "BeeDeck"
