"""`beedeck bench`: the baseline-versus-speculation benchmark, headless.

Starts the engine itself (the starter profile by default; ``--synthetic`` uses a tiny synthetic sticky
model: ``dflash`` the DFlash pair of tests/fixtures/synth_gguf.py, ``mtp`` / ``mtp-random`` the qwen35
target with its own MTP head of tests/fixtures/synth_mtp.py, which give real drafts on a CPU, the sticky
ones with 100 % acceptance) or measures a running server (``--url``). ``--modes`` is any subset of
baseline, dflash, eagle3, dspark, mtp and ngram (N-gram; ``all``: every mode this engine and these files
run; the engines' own spellings such as draft-mtp or ngram-simple are understood). Prints a progress bar
on stderr and the final table on stdout, writes report.md / report.json / samples.csv (+ PNG charts
when PySide6 is importable) to ``--out``; the measured replies teach the workload advice (`beedeck
advice`). Exit status: 0 ok, 1 a run failed, 2 bad arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from beedeck.clicmd.advice import learn_from_bench
from beedeck.clicmd.background import run_interruptible
from beedeck.clicmd.engine.serve import api_key_from
from beedeck.clicmd.launch_args import add_settings_arguments, apply_settings_arguments
from beedeck.core import paths
from beedeck.core.bench.baseline_cache import BaselineCache
from beedeck.core.bench.report import ChartRenderer, Summary, same_text_note, summarize, write_reports
from beedeck.core.bench.results import BenchReport
from beedeck.core.bench.runner import DEFAULT_REPS, IN_SERVER_CHOICES, SWITCHING, parse_variants, run_bench
from beedeck.core.bench.suites import BUILTIN_SUITES, BenchError, BenchSuite, load_suite
from beedeck.core.engine.caps import EngineCaps, ProbeError
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.ports import HostError
from beedeck.core.engine.probe import probe_engine
from beedeck.core.models.paircheck import modes_for, read_infos
from beedeck.core.starter import (
    StarterMissing,
    settings_for_model,
    starter_engine,
    starter_model,
)

SYNTH_MAX_TOKENS = 128  # the sticky pair repeats one token: 128 are enough to see the speed-up
SYNTHETIC_KINDS = ("dflash", "mtp", "mtp-random")
# Other words for a mode on the command line ("off" as --spec says it; the engines' draft-<mode> is understood too).
OTHER_WORDS = {"off": Mode.BASELINE, "none": Mode.BASELINE, "ngram": Mode.MODEL_FREE, "n-gram": Mode.MODEL_FREE}


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("bench", help="benchmark baseline vs speculation (DFlash, EAGLE-3, DSpark, MTP, N-gram)")
    p.add_argument("--suite", default="seed", metavar="NAME|FILE",
                   help=f"a built-in suite ({', '.join(BUILTIN_SUITES)}) or a JSON suite file (default: seed)")
    p.add_argument("--modes", metavar="LIST", help="comma list of baseline, dflash, eagle3, dspark, mtp, ngram, or all (every mode "
                   "this engine and these files run); an N-gram type such as ngram-simple picks that type "
                   "(default: baseline and every mode the model files bring: the draft's kind with --draft, mtp "
                   "for a target with MTP heads)")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"repetitions per prompt (default: {DEFAULT_REPS})")
    p.add_argument("--warmup", type=int, default=1, help="warm-up replies per mode (default: 1)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="override the suite's reply length")
    p.add_argument("--temperature", type=float, metavar="T", help="override the suite's temperature (0 = greedy)")
    p.add_argument("--out", metavar="DIR", help="report folder (default: a new folder under the data folder)")
    p.add_argument("--engine", metavar="BIN", help="llama-server binary (default: the starter engine)")
    p.add_argument("--target", metavar="GGUF", help="target model (default: the starter model)")
    p.add_argument("--draft", metavar="GGUF", help="draft model (a DFlash, EAGLE-3 or DSpark GGUF)")
    p.add_argument("--url", metavar="URL", help="measure a running server instead of starting one (one mode)")
    p.add_argument("--api-key-prompt", action="store_true",
                   help="ask for the --url server's API key on the terminal (or set BEEDECK_API_KEY)")
    p.add_argument("--synthetic", nargs="?", const="dflash", choices=SYNTHETIC_KINDS, metavar="KIND",
                   help="use a tiny synthetic model, greedy, on a CPU: dflash (the default: sticky target + DFlash "
                        "draft, 100 %% acceptance), mtp (sticky qwen35 target with its own MTP head, 100 %%) or "
                        "mtp-random (random target and head: real work, low acceptance)")
    p.add_argument("--switching", choices=SWITCHING, default="auto",
                   help="how modes are served (default/restart: one server per mode, the baseline without the "
                        "draft; side-by-side: every mode's server at once, requests interleaved, fairest on a busy "
                        "CPU; per-request: only the DFlash server, its baseline asked for no drafts)")
    p.add_argument("--in-server-baseline", choices=IN_SERVER_CHOICES, default="auto",
                   help=f"also measure the DFlash server asked for no drafts ({IN_SERVER_BASELINE.key}: what the chat "
                        "toggle's per-request Baseline costs); auto: where the engine honours it")
    add_settings_arguments(p)
    p.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")
    p.add_argument("--fresh-baseline", action="store_true",
                   help="measure the baseline again: by default the one kept for this setup (GPU, engine build, model "
                        "file, context, KV types, settings, prompts) is compared against, and the report says when "
                        "it was measured")
    p.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for each server")
    p.set_defaults(func=run_bench_command)


def _load_synth(name: str = "synth_gguf") -> ModuleType:
    """tests/fixtures/<name>.py (it lives in the source checkout, not in the package)."""
    root = Path(__file__).resolve().parents[3]
    path = root / "tests" / "fixtures" / f"{name}.py"
    if not path.is_file():
        raise BenchError(f"--synthetic needs {path} (a BeeDeck source checkout): pass --target and --draft instead.")
    try:
        if name == "synth_gguf":
            spec = importlib.util.spec_from_file_location("beedeck_synth_gguf", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        # synth_mtp imports its sibling as tests.fixtures.synth_gguf: import it from the checkout.
        if str(root) not in sys.path:
            sys.path.append(str(root))
        return importlib.import_module(f"tests.fixtures.{name}")
    except ImportError as exc:
        raise BenchError(f"--synthetic needs the gguf package ({exc}): pip install gguf, or pass --target/--draft.") from None


def _resolve(args: argparse.Namespace) -> tuple[Path | None, EngineCaps | None, LaunchSettings | None, BenchSuite,
                                                list[Variant]]:
    suite = load_suite(args.suite)
    engine: Path | None = None
    caps: EngineCaps | None = None
    settings: LaunchSettings | None = None
    max_tokens, temperature = args.max_tokens, args.temperature
    if args.url:
        default_modes = [Variant(Mode.BASELINE)]
    else:
        if args.engine:
            engine = Path(args.engine)
        if args.synthetic in ("mtp", "mtp-random"):
            target = synthetic_mtp_target(paths.cache_dir() / "synth-bench", sticky=args.synthetic == "mtp")
            settings = synthetic_mtp_settings(target)
        elif args.synthetic:
            settings = synthetic_dflash_settings(engine)
        if args.synthetic:
            max_tokens = max_tokens or SYNTH_MAX_TOKENS
            temperature = 0.0 if temperature is None else temperature
        engine = engine or starter_engine()  # raises StarterMissing with the install command
        if settings is None:
            settings = settings_for_model(engine, Path(args.target) if args.target else starter_model())
        if args.target:
            settings.target = str(Path(args.target))
        if args.draft:
            settings.draft = str(Path(args.draft))
        apply_settings_arguments(args, settings)
        caps = probe_engine(str(engine))
        default_modes = default_bench_modes(caps, settings)
    modes = parse_modes(args.modes, caps, settings) if args.modes else default_modes
    return engine, caps, settings, suite.with_overrides(max_tokens, temperature), modes


def default_bench_modes(caps: EngineCaps, settings: LaunchSettings) -> list[Variant]:
    """Baseline plus each mode the model files bring (the draft's kind, MTP heads) that this engine runs."""
    options = modes_for(caps, settings, *read_infos(settings))
    return [Variant(Mode.BASELINE), *(Variant(o.key) for o in options if o.available and o.key.info.draft_kinds)]


def _word_mode(word: str) -> Mode | None:
    """A mode by another word: "off", "ngram", the engines' draft-<mode> (draft-mtp, draft-dflash)."""
    if word in OTHER_WORDS:
        return OTHER_WORDS[word]
    mode = Mode.parse(word.removeprefix("draft-")) if word.startswith("draft-") else None
    return mode if mode is not None and mode.speculates and mode != Mode.MODEL_FREE else None


def parse_modes(text: str, caps: EngineCaps | None, settings: LaunchSettings | None) -> list[Variant]:
    """``--modes``: mode keys, ``all``, the engines' spellings (draft-mtp, off) and model-free types
    (ngram-simple, copyspec: that type is then the one measured, set on ``settings``). An unknown word
    raises BenchError naming the words it takes."""
    out: list[Variant] = []
    for word in (w.strip().lower() for w in text.split(",")):
        if not word:
            continue
        if word == "all":
            if caps is None or settings is None:
                raise BenchError("--modes all needs BeeDeck to start the engine (it cannot tell what a --url server "
                                 "runs): name the mode instead.")
            out += [Variant(o.key) for o in modes_for(caps, settings, *read_infos(settings)) if o.available]
        elif (variant := Variant.parse(word)) is not None:
            out.append(variant)
        elif (mode := _word_mode(word)) is not None:
            out.append(Variant(mode))
        elif caps is not None and settings is not None and word in caps.model_free_spec_types:
            settings.spec_model_free_type = word
            out.append(Variant(Mode.MODEL_FREE))
        else:
            out += parse_variants([word])  # BenchError naming the words it takes
    return list(dict.fromkeys(out))


def synthetic_bench_pair(folder: Path, fmt: str = "mainline") -> tuple[Path, Path]:
    """The sticky synthetic pair, sized for benchmarking (about 50 MB): the 2 MB default target is so
    small that per-token server overhead hides DFlash's batching (measured 0.2x-1.3x on the busy
    2-core machine), while at n_embd 512 / n_ff 2048 compute dominates and the speed-up is clear.
    ``fmt``: the draft format, "mainline" (mainline, BeeLlama >= 0.4) or "bee" (BeeLlama 0.1-0.3)."""
    suffix = "" if fmt == "mainline" else f"-{fmt}"
    target, draft = folder / "bench-target-sticky-512.gguf", folder / f"bench-dflash-sticky-512{suffix}.gguf"
    if target.is_file() and draft.is_file() and draft.stat().st_mtime >= target.stat().st_mtime:
        return target, draft
    sg = _load_synth()
    folder.mkdir(parents=True, exist_ok=True)
    if not target.is_file():
        sg.write_llama_target(target, sticky=True, n_embd=512, n_ff=2048, n_head=8)
    sg.write_dflash_draft(draft, target, sticky=True, fmt=fmt)
    return target, draft


def synthetic_mtp_target(folder: Path, sticky: bool = True) -> Path:
    """A synthetic qwen35 target with one MTP head, sized for benchmarking like the DFlash pair
    (n_embd 512, n_ff 2048: compute dominates the per-token overhead). ``sticky``: always " bee", and
    the head always right; else random weights (varied text, a head that is rarely right)."""
    kind = "sticky" if sticky else "random"
    path = folder / f"bench-mtp-target-{kind}-512.gguf"
    sm = _load_synth("synth_mtp")
    if sm._current(path):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    return Path(sm.write_mtp_target(path, sticky=sticky, n_embd=512, n_ff=2048, n_head=8))


def synthetic_mtp_settings(target: Path) -> LaunchSettings:
    """Launch settings for a synthetic MTP target: as :func:`synthetic_settings`, no draft file; the
    spec mode stays off, so the baseline is the default and ``mtp`` one of the modes."""
    return LaunchSettings(target=str(target), ctx_size=4096, parallel=1, flash_attn="auto",
                          extra_args=["--threads", "1"])


def synthetic_settings(target: Path, draft: Path) -> LaunchSettings:
    """Launch settings for the synthetic pair: greedy-friendly, CPU-stable."""
    # ChatML template inside the target. Flash attention "auto": small heads have no kernel and
    # "on" hung requests on the 2-core CPU (docs/reference/dflash-on-cpu.md gotcha 6). --threads 1: on a shared CPU
    # two llama.cpp threads spin on each other's barriers (measured 6-260 tok/s swings vs 160-300).
    return LaunchSettings(target=str(target), draft=str(draft), ctx_size=4096, parallel=1, flash_attn="auto",
                          draft_n_max=15, extra_args=["--threads", "1"])


def synthetic_dflash_settings(engine: Path | None) -> LaunchSettings:
    """The synthetic DFlash pair's settings, its draft in the format ``engine`` reads (BeeLlama's own
    ``dflash-draft`` arch, else mainline's; no engine given: mainline's, for the starter engine)."""
    fmt = "bee" if engine is not None and probe_engine(str(engine)).dflash_draft_arch == "dflash-draft" else "mainline"
    target, draft = synthetic_bench_pair(paths.cache_dir() / "synth-bench", fmt)
    return synthetic_settings(target, draft)


def chart_renderer() -> ChartRenderer | None:
    """The QPainter chart renderer when PySide6 is importable, else None (no PNGs)."""
    try:
        from beedeck.ui.bench.bench_chart import render_report_charts
    except ImportError:
        return None
    return render_report_charts


def _bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:50]:<50}")
    sys.stderr.flush()


def format_table(report: BenchReport, summary: Summary) -> str:
    """A plain-text table of the overall figures for the terminal; the speed-up column is as wide as the
    rule's words in it ("2.81x (1.87-3.12, 3 runs of 3 prompts)", "one run: no interval")."""
    cells = {mode: (m.speedup.text() if m.speedup else "-") for mode, m in summary.overall.items()}
    width = max([len("speed-up (95% CI)"), *map(len, cells.values())])
    head = f"{'mode':<23} {'gen tok/s':>10} {'min-max':>17} {'accept':>8}   {'speed-up (95% CI)':<{width}} {'same':>6}"
    lines = [head, "-" * len(head)]
    for mode in report.variants:
        m = summary.overall.get(mode)
        if m is None or m.gen_tps is None:
            lines.append(f"{mode.label:<23} no finished replies")
            continue
        g = m.gen_tps
        acc = f"{100 * m.acceptance:.1f}%" if m.acceptance is not None else "-"
        same = f"{m.identical}/{m.compared}" if m.compared else "-"
        lines.append(f"{mode.label:<23} {g.median:>10.1f} {f'{g.min:.1f}-{g.max:.1f}':>17} {acc:>8}   "
                     f"{cells[mode]:<{width}} {same:>6}")
    return "\n".join(lines)


def run_bench_command(args: argparse.Namespace) -> int:
    try:
        engine, caps, settings, suite, modes = _resolve(args)
    except (BenchError, StarterMissing, ProbeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else paths.data_dir() / "bench" / time.strftime("%Y%m%d-%H%M%S")
    cancel = threading.Event()

    def work() -> BenchReport:
        return run_bench(engine, caps, settings, suite, modes, reps=args.reps, warmup=args.warmup,
                         on_progress=_bar, cancel_event=cancel, switching=args.switching,
                         in_server_baseline=args.in_server_baseline,
                         url=args.url, api_key=api_key_from(args), ready_timeout=args.ready_timeout,
                         baselines=BaselineCache(), fresh_baseline=args.fresh_baseline)

    # The server is stopped on Ctrl-C and the replies that finished are still written.
    outcome = run_interruptible(work, cancel, "beedeck-bench")
    interrupted = outcome.interrupted
    sys.stderr.write("\n")
    try:
        report = outcome.unwrap()
    except (BenchError, HostError) as exc:  # HostError: a --host that does not resolve here
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = write_reports(report, out, None if args.no_charts else chart_renderer())
    summary = summarize(report)
    print(format_table(report, summary))
    if note := same_text_note(report, summary):
        print(f"note: {note}")
    for flag in summary.flags:
        print(f"note: {flag}")
    if caps is not None and settings is not None:
        print(learn_from_bench(report, caps, settings))
    else:
        print("note: the speed advice learns only from benchmarks BeeDeck starts (it cannot tell which engine and "
              "model files a --url server runs).")
    print(f"reports: {', '.join(str(f) for f in files)}")
    if interrupted or report.cancelled:
        return 130
    return 0 if report.ok else 1
