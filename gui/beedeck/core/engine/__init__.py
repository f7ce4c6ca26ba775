"""The engine: llama-server binaries (BeeLlama Gen A/B, mainline). Probe what a binary supports,
turn launch settings into its argv, run and watch the process, read its log, talk to its HTTP API,
keep the registry, build from source and download releases.

Owns everything about the binary and its process. May import ``machine`` and the plumbing; never
``models`` (model files reach it as paths), ``chat``, ``bench`` or ui.
"""
