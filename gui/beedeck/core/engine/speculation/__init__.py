"""Speculation's rules in one place: which modes a setup can run (``modes``; the modes themselves, with their
names, colours and draft kinds, are ``core/engine/mode.py``),
how a Baseline <-> mode click is decided (``mode_switch``, the Qt-free switch; ``switching`` the
per-request check it relies on; ``standby`` where the other mode waits; ``restart`` a switch's fast
restart and ``switch_cost`` its learnt time), when speculation stops paying for a prompt (``spec_guard``)
and what is learnt per prompt kind (``advice``).

Not here, because they read the GGUF (``core/models/gguf/reader.py``) and the models wing sits above the
engine: the draft kind of a file (``core/models/draft_kinds.py``) and the target/draft pair check
(``core/models/paircheck.py``). A speculation mode's flags per engine live with the other flags in
``core/engine/argv/spec.py``. May import the rest of the engine wing, machine and the plumbing.
"""
