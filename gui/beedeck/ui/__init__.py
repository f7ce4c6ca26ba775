"""BeeDeck's PySide6 widgets, one per module, in folders that mirror ``beedeck.core``'s wings:
``window`` (the shell: app, main window, background jobs), ``chat``, ``engine`` (server controller,
Baseline | DFlash toggle, log, failures), ``launch`` (settings dialog, launch form, memory bar),
``setup`` (first-run wizard), ``bench`` and ``gauge``.
"""
