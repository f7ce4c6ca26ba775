"""The Hugging Face Hub: what a repo holds and how big its models are, before and while downloading.

``client`` asks the Hub (metadata, auth, gated repos, the cache layout) and downloads a model's files
through BeeDeck's resumable loop; ``checks`` is what BeeDeck does not take on trust (how long an answer
takes, a copy on disk that has not shown the Hub's sha256); ``range_reader`` reads the start of a remote
file by HTTP range requests; ``sizing`` sizes any GGUF repo from those headers, cached by revision.
Outside code imports the module it needs; nothing is re-exported here.

Owns talking to the Hub. May import ``gguf/``, ``draft_kinds`` and the plumbing (``download``,
``connection``, ``paths``, ``secrets``); never the recommender (``recommend/``), which plans with it.
"""
