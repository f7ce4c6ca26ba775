"""``beedeck models ...``, ``inspect``, ``plan``, ``recommend``: the models wing, headless."""
