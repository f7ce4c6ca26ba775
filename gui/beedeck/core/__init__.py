"""BeeDeck's Qt-free core, in wings named after the product's nouns.

Layers, top to bottom (import-linter enforces them; a wing imports only wings below it):

- ``agents``, ``bench``, ``chat``: coding agents' configs, the benchmark, and the chat store and speculation guard
  (independent of each other)
- ``serving``: the app's llama-server and its life (start, restart, swap, preload, replace, attach, stop)
- ``launcher``, ``starter``: start a server after the pre-launch guard; the built-in starter profile
- ``models``: GGUF files, the catalog, hub downloads, the library, pair checks, the memory planner,
  the recommender and the pre-launch guard
- ``engine``: llama-server binaries: probe, launch settings and argv, the process, its log, the HTTP
  client, the registry, builds and release downloads
- ``machine``: GPUs (NVML, nvidia-smi), the system, the live sampler
- plumbing: ``paths``, ``settings``, ``secrets``, ``download``, ``printable`` (text from outside made inert)
"""
