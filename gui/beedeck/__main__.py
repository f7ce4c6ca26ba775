"""`python -m beedeck` opens the desktop app; `python -m beedeck COMMAND` runs the CLI."""

import sys


def main() -> int:
    if len(sys.argv) > 1:
        from beedeck.cli import main as cli_main

        return cli_main()
    from beedeck.ui.app import main as gui_main

    return gui_main()


if __name__ == "__main__":
    sys.exit(main())
