"""The models: what a model file is and whether a pair fits a card and an engine.

Wings by noun: ``gguf/`` (the file format: the header reader and scanner), ``hub/`` (the Hugging Face
Hub: downloads and sizing a repo from its headers), ``planner/`` (the memory planner) and
``recommend/`` (which pair to recommend, from the catalog or a Hub repo). At the root, what several of
them use: ``catalog`` (the shipped pairs), ``library`` (models on disk), ``sidecars``, ``paircheck``,
``draft_kinds``, ``header_cache`` and ``guard`` (the pre-launch guard).

May import ``engine`` (its capability model and launch settings), ``machine`` and the plumbing; never
``chat``, ``bench`` or ui.
"""
