"""BeeDeck's PySide6 widgets, one per module, in folders that mirror ``beedeck.core``'s wings:
``window`` (the shell: app, main window, menus, its small dialogs), ``setup`` (first-run wizard),
``bench`` (benchmark and tune), ``launch`` (settings dialog, launch form, memory bar), ``speculation``
(the switch's runner and checker, the advice follower, the Baseline | <modes> toggle, the guard banner),
``chat``, ``engine`` (server controller, log, failures) and ``gauge``. ``session.py`` holds the one
:class:`~beedeck.ui.session.Session` the window renders and the dialogs get.
"""
