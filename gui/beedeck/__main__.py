"""`python -m beedeck` opens the desktop app (GUI options such as --theme pass through);
`python -m beedeck COMMAND ...` runs the headless CLI (`python -m beedeck --help` lists commands)."""

import sys


def wants_cli(args: list[str]) -> bool:
    return bool(args) and (not args[0].startswith("-") or args[0] in ("-h", "--help", "--version"))


def main() -> int:
    if wants_cli(sys.argv[1:]):
        from beedeck.cli import main as cli_main

        return cli_main()
    from beedeck.ui.window.app import main as gui_main

    return gui_main()


if __name__ == "__main__":
    sys.exit(main())
