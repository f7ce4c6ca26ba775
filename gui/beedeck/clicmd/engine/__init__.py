"""``beedeck engine ...`` and ``serve``: the engine wing, headless."""
