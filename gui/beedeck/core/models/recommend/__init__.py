"""Which pair to recommend: the setup that runs best here, for the catalog and for any Hub repo.

``from_catalog`` picks the best catalog pair, quant and context that fit the GPUs (``beedeck recommend``,
the wizard's recommendation); ``from_repo`` does it for one Hub repo (``recommend --repo``, the wizard's
search box). Both plan every quant with every draft kind the engine runs, from headers alone
(``catalog_plan`` for the catalog's pairs, ``live_plan`` for a repo's files, both through the memory
planner and the pre-launch guard), pick the fast mode on its evidence (``mode_choice``) and rank the
results (``choice``); ``catalog_sizing`` reads the catalog repos' headers they plan with. The catalog
itself stays at the models root (``catalog``): the library matches local files against it too. Outside
code imports the module it needs; nothing is re-exported here.

Owns the recommendation. May import the rest of ``models`` (``gguf/``, ``hub/``, ``planner/``, the
catalog, the library, the guard), ``engine`` and the plumbing; nothing in ``models`` imports it.
"""
