"""Pure parsers for llama-server's own texts: the ``--help`` option table, ``--version`` and
``--list-devices``, and :func:`caps_from_texts` that turns them into :class:`EngineCaps`.

Tests run them on the real help texts in ``tests/fixtures/engines``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps, Generation, ProbeError

# ----------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class HelpOption:
    """One entry of the ``--help`` option table."""

    names: tuple[str, ...]
    hint: str  # the value hint, e.g. "N", "[on|off|auto]"; "" for a switch
    help_lines: tuple[str, ...]

    @property
    def help(self) -> str:
        return " ".join(line for line in self.help_lines if line)


HELP_COLUMN = 40  # common_arg::to_string() starts the help text at column 40
_CONTINUATION = " " * HELP_COLUMN


def _split_option_part(part: str) -> tuple[tuple[str, ...], str]:
    names: list[str] = []
    hint_parts: list[str] = []
    for token in (t.strip() for t in part.split(", ")):
        if not token:
            continue
        if not hint_parts and token.startswith("-"):
            name, _, rest = token.partition(" ")
            names.append(name)
            if rest.strip():
                hint_parts.append(rest.strip())
        else:
            hint_parts.append(token)
    return tuple(names), ", ".join(hint_parts)


def parse_help(text: str) -> list[HelpOption]:
    """Parse llama.cpp's ``--help`` option table (docs/reference/engine-facts.md §2.1 "Parser recipe")."""
    options: list[HelpOption] = []
    names: tuple[str, ...] | None = None
    hint = ""
    lines: list[str] = []

    def flush() -> None:
        nonlocal names
        if names:
            options.append(HelpOption(names, hint, tuple(lines)))
        names = None

    for raw in text.splitlines():
        line = raw.rstrip("\r\n")
        if names is not None and line.startswith(_CONTINUATION):
            lines.append(line.strip())
            continue
        if line.startswith("-") and not line.startswith("-----"):
            flush()
            # Names+hint up to 37 characters are padded to column 40; longer ones break the line.
            if len(line) > HELP_COLUMN and line[HELP_COLUMN - 3 : HELP_COLUMN] == "   ":
                part, help_text = line[:HELP_COLUMN], line[HELP_COLUMN:]
            else:
                part, help_text = line, ""
            names, hint = _split_option_part(part.rstrip())
            lines = [help_text.strip()] if help_text.strip() else []
            if not names:
                names = None
            continue
        flush()  # a section header, a blank line or anything else ends the option
    flush()
    return options


_VERSION_RE = re.compile(r"^version: (\S+)(?: \(build (\d+), commit (\w+)\)| \((\w+)\))?", re.MULTILINE)
# BeeLlama >= 0.4.5 prints "0.4.5-dev build 213" (v0.4.3 printed "version: 11207 (ba27edad2)"; field notes §1),
# with or without the "version: " prefix and a trailing commit.
_BEE_VERSION_RE = re.compile(r"^(?:version: )?v?(\d+\.\d+\.\d+(?:-[\w.]+)?),? build (\d+)(?: \(?(?:commit )?(\w+)\)?)?",
                             re.MULTILINE)
_BUILT_WITH_RE = re.compile(r"^built with (.+)$", re.MULTILINE)


def parse_version(text: str) -> tuple[str, int | None, str, str]:
    """(version, build, commit, built_with) from ``--version`` output; empty parts when absent."""
    version, build, commit = "", None, ""
    bee = _BEE_VERSION_RE.search(text)
    m = None if bee else _VERSION_RE.search(text)
    if bee:
        version, build, commit = bee.group(1), int(bee.group(2)), bee.group(3) or ""
    elif m:
        version = m.group(1)
        if m.group(2):
            build, commit = int(m.group(2)), m.group(3)
        else:
            commit = m.group(4) or ""
            if version.isdigit():  # Bee and older mainline: "version: <build> (<commit>)"
                build = int(version)
    w = _BUILT_WITH_RE.search(text)
    return version, build, commit, (w.group(1).strip() if w else "")


def parse_devices(text: str) -> tuple[tuple[str, ...], str]:
    """(device lines, backend) from ``--list-devices``; backend "cpu" when it lists ``(none)``."""
    devices: list[str] = []
    seen_header = False
    for line in text.splitlines():
        if line.strip().startswith("Available devices"):
            seen_header = True
            continue
        if seen_header and line.startswith(" ") and line.strip():
            devices.append(line.strip())
    if not seen_header:
        return (), ""
    real = [d for d in devices if d != "(none)"]
    if not real:
        return (), "cpu"
    m = re.match(r"([A-Za-z]+)", real[0])
    return tuple(real), (m.group(1).lower() if m else "")


def _allowed_values(opt: HelpOption) -> tuple[str, ...]:
    collected: list[str] = []
    inside = False
    for line in opt.help_lines:
        if line.startswith("allowed values:"):
            inside = True
            line = line[len("allowed values:") :]
        elif inside and (not line or line.startswith("(")):
            break
        if inside:
            collected.append(line)
    return tuple(v.strip() for v in ",".join(collected).split(",") if v.strip())


def _hint_values(hint: str) -> tuple[str, ...]:
    """``[on|off|auto]`` / ``{a,b}`` / ``a,b,c`` -> values; a plain placeholder such as ``N`` -> ()."""
    inner = hint.strip().strip("[]{}")
    if not re.search(r"[|,]", inner):
        return ()
    return tuple(v.strip() for v in re.split(r"[|,]", inner) if v.strip())


_DEFAULT_RE = re.compile(r"default:\s*([^)]*)\)")


def _default_of(opt: HelpOption) -> str | None:
    m = _DEFAULT_RE.search(opt.help)
    if not m:
        return None
    return m.group(1).strip().strip("'\"").strip()


def _load_modes(opt: HelpOption) -> tuple[str, ...]:
    modes = [m.group(1) for line in opt.help_lines if (m := re.match(r"- ([\w+]+):", line))]
    return tuple(modes) or _hint_values(opt.hint)


def _generation(
    flags: frozenset[str], spec_types: tuple[str, ...], cache_types: tuple[str, ...]
) -> Generation:
    bee = "--spec-dm-adaptive" in flags or "--spec-dm-controller" in flags
    if bee and ("--spec-dflash-cross-ctx" in flags or "dflash" in spec_types):
        return Generation.BEE_A
    if bee and ("draft-dflash" in spec_types or any(t.startswith("kvarn") for t in cache_types)):
        return Generation.BEE_B
    if not bee and "draft-dflash" in spec_types:
        return Generation.MAINLINE
    return Generation.UNKNOWN


def caps_from_texts(path: str, version_text: str, help_text: str, devices_text: str = "") -> EngineCaps:
    """Build :class:`EngineCaps` from captured outputs; raises :class:`ProbeError` without an option table."""
    options = parse_help(help_text)
    by_name = {name: opt for opt in options for name in opt.names}
    if "--port" not in by_name or not ("-m" in by_name or "--model" in by_name):
        what = (
            "prints no llama.cpp option table" if not options else "is a llama.cpp tool but not llama-server"
        )
        raise ProbeError(
            f"{path} is not llama-server: its --help {what} (no --model/--port options). "
            "Pick the llama-server binary (build/bin/llama-server, llama-server.exe on Windows)."
        )

    def values(flag: str, source: str) -> tuple[str, ...]:
        opt = by_name.get(flag)
        if opt is None:
            return ()
        return _allowed_values(opt) if source == "allowed" else _hint_values(opt.hint)

    spec_types = values("--spec-type", "hint")
    cache_types = values("--cache-type-k", "allowed")
    ngl = by_name.get("--gpu-layers") or by_name.get("-ngl")
    gpu_layers_values = tuple(dict.fromkeys(re.findall(r"'(\w+)'", ngl.help))) if ngl else ()
    load = by_name.get("--load-mode")
    defaults: dict[str, str] = {}
    for opt in options:
        value = _default_of(opt)
        if value is not None:
            for name in opt.names:
                if name.startswith("--"):
                    defaults[name] = value
    flags = frozenset(by_name)
    version, build, commit, built_with = parse_version(version_text)
    devices, backend = parse_devices(devices_text)
    return EngineCaps(
        path=path,
        generation=_generation(flags, spec_types, cache_types),
        version=version,
        build=build,
        commit=commit,
        built_with=built_with,
        flags=flags,
        spec_types=spec_types,
        cache_types=cache_types,
        draft_cache_types=values("--spec-draft-type-k", "allowed"),
        flash_attn_values=values("--flash-attn", "hint"),
        gpu_layers_values=gpu_layers_values,
        defaults=defaults,
        load_modes=_load_modes(load) if load else (),
        devices=devices,
        gpu_backend=backend,
    )
