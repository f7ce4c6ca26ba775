"""Coding agents on BeeDeck's server ("Use with..."): what each client needs (base URL, key, model
alias, context, server flags) and how its own config file is written (diff first, a history, undo).

Owns: ``endpoint`` (the server an agent talks to), ``running`` (which server that is: BeeDeck's running one
from its record, command line and /props, else the profile; the key ``agent key`` gives), ``clients`` (one
table row per client: its config file and how to render it), ``configfile`` (plan, write after a durable
record, undo through the history), ``safefile`` (links, mode and owner, bounds, the durable replace, the
lock), ``formats`` and ``jsonc`` (every value through the format's own quoting; JSONC edited in place),
``toolsafe`` (speculation off where the known-issue table says tool calls break; forced tool calls per engine).
May import: launcher/starter/profile and everything below them (engine, models, secrets, paths).
"""
