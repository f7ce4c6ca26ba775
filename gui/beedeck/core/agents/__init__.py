"""Coding agents on BeeDeck's server ("Use with..."): what each client needs (base URL, key, model
alias, context, server flags) and how its own config file is written (backup, diff first, undo).

Owns: ``endpoint`` (the server an agent talks to, the key from the keyring), ``clients`` (one table row
per client: its config file and how to render it), ``configfile`` (plan, write with a backup, undo),
``toolsafe`` (speculation off where the known-issue table says tool calls break).
May import: launcher/starter/profile and everything below them (engine, models, secrets, paths).
"""
