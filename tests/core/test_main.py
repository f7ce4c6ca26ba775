from beedeck.__main__ import wants_cli


def test_commands_go_to_the_cli_and_gui_options_to_the_app() -> None:
    assert wants_cli(["detect"]) and wants_cli(["chat", "hi"]) and wants_cli(["--help"]) and wants_cli(["--version"])
    assert not wants_cli([]) and not wants_cli(["--no-autostart"]) and not wants_cli(["--theme", "dark"])
