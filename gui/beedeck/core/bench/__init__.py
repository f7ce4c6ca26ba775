"""The benchmark: suites of prompts, the runner that serves every mode fairly, and the report
(statistics, Markdown/JSON/CSV); the auto-tuner in ``tune/``.

May import every other core wing; nothing imports it but the CLI and ui.
"""
