"""The machine: NVIDIA GPUs through NVML with an nvidia-smi fallback, RAM/CPU/disk, a live GPU sampler.

Owns hardware facts only. May import the plumbing (``beedeck.core.paths``); nothing else of BeeDeck.
"""
