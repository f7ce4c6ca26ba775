"""The engine: llama-server binaries (BeeLlama Gen A/B, mainline). Probe what a binary supports,
turn launch settings into its argv, run and watch the process, read its log, talk to its HTTP API,
keep the registry, build from source and download releases.

Subpackages where a family had a prefix: ``argv/`` (the argument list), ``building/`` (building from
source; not ``build/``, a name tools take for build output), ``client/`` (the HTTP client),
``releases/`` (prebuilt downloads), ``rpc/`` (RPC workers and their probe) and ``speculation/``
(speculation's rules: modes, the Qt-free mode switch, per-request check, standby, fast restart, the
guard and the learnt advice).

Owns everything about the binary and its process. May import ``machine`` and the plumbing; never
``models`` (model files reach it as paths), ``chat``, ``bench`` or ui.
"""
