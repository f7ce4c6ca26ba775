"""The command line (`beedeck COMMAND`): one module per command group, named after the wings it drives
(machine, models, engine, chat, bench, tune, advice, connect, worker); each only parses, calls the core
and prints. The app itself is `beedeck` with no command (beedeck.__main__)."""
