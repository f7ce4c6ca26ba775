"""Speculation's views, mirroring ``beedeck.core.engine.speculation``: the Baseline | <modes> toggle
(``mode_toggle``) and its "why not" popover (``mode_popover``), the per-request check run off the GUI
thread (``switch_checker``), and the speculation guard's banner and monitor (``guard_banner``). The rules
they show live in the core; these modules render them and report clicks. May import the shared widgets
(``background``, ``wrap_label``) and the core.
"""
