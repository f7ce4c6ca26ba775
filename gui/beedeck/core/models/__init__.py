"""The models: GGUF headers, the pair catalog, Hugging Face downloads, the local library, pair
checks, the memory planner (``planner/``), the recommender and the pre-launch guard.

Owns what a model file is and whether a pair fits a card and an engine. May import ``engine`` (its
capability model and launch settings), ``machine`` and the plumbing; never ``chat``, ``bench`` or ui.
"""
