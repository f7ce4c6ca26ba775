"""Which speculation mode is the fast path, per card class and engine, and on what evidence.

Order of evidence: BeeDeck's own measured advice for this setup (:mod:`beedeck.core.engine.speculation.advice`: the
speed advice that tune runs and benchmarks feed, code prompts first: BeeDeck is a coding assistant);
else the published figures in ``resources/mode-evidence.json`` for the model family and card class
(each with its source); else a rule (the target's own MTP head is free, so it comes first). Engine
rules remove what an engine cannot run (BeeLlama before v0.4.4 and DFlash2, issue #134; a BeeLlama whose
release is unknown is not trusted with DFlash2 either). The mode must also be among the kinds the plan
found runnable and fitting. It sits in the models wing because both recommenders use it: the catalog's
(:mod:`from_catalog`) and a Hub repo's (:mod:`from_repo`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.known_issues import parse_version
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import CODE, KINDS, WorkloadAdvice

CLASSES = ("24gb-ampere", "24gb-ada", "32gb-blackwell", "larger")
CLASS_LABEL = {"24gb-ampere": "24 GB Ampere (3090)", "24gb-ada": "24 GB Ada (4090)",
               "32gb-blackwell": "32 GB Blackwell (5090)", "larger": "larger cards", "smaller": "smaller cards"}
RULE_ORDER = ("mtp", "dflash2", "dflash", "dspark", "eagle3", "mtp-head", "dflash-draft", "none")
EVIDENCE_LABEL = {"measured": "measured here", "published": "published figures", "rule": "rule"}
# A plan kind in the user's words (the toggle's names: core.engine.mode.Mode.label; DFlash2 and the
# fork format are DFlash drafts of another layout).
KIND_LABEL = {"none": "no speculation", "mtp": "MTP", "mtp-head": "MTP (head file)", "dflash": "DFlash",
              "dflash2": "DFlash2", "dflash-draft": "DFlash (fork format)", "dspark": "DSpark", "eagle3": "EAGLE-3"}
# The kinds an engine generation runs, for the table (every one assumed to fit): BeeLlama >= 0.4's own --help
# lists draft-dflash, draft-eagle3, draft-mtp and draft-dspark (tests/fixtures/engines/beellama-0.4.3-cpu.help.txt)
TABLE_KINDS = {Generation.MAINLINE: ("mtp", "dflash2", "dspark", "eagle3"),
               Generation.BEE_B: ("mtp", "dflash2", "dspark", "eagle3"), Generation.BEE_A: ("dflash-draft",)}
TABLE_ENGINES = ((Generation.MAINLINE, ""), (Generation.BEE_B, "v0.4.3"), (Generation.BEE_B, "v0.4.7"),
                 (Generation.BEE_A, "v0.3.1"))


@dataclass(frozen=True)
class ModeChoice:
    card_class: str
    engine: str  # a generation value, with the version when it matters
    mode: str  # a live_plan kind key
    evidence: str  # "measured", "published" or "rule"
    why: str
    source: str = ""

    def line(self) -> str:
        head = f"{CLASS_LABEL.get(self.card_class, self.card_class)}, {self.engine}: {KIND_LABEL.get(self.mode, self.mode)}"
        label = EVIDENCE_LABEL.get(self.evidence, self.evidence)
        return f"{head} ({label}: {self.why}" + (f"; source: {self.source})" if self.source else ")")


def card_class(memory_total: int, compute_capability: tuple[int, int] | None, name: str = "") -> str:
    gib = memory_total / 2**30
    major = compute_capability[0] if compute_capability else None
    minor = compute_capability[1] if compute_capability else None
    if gib > 34:
        return "larger"
    if gib > 26:
        return "32gb-blackwell" if (major is not None and major >= 10) or "50" in name else "larger"
    if gib >= 22:
        if (major, minor) == (8, 9) or "40" in name:
            return "24gb-ada"
        return "24gb-ampere" if major == 8 or "30" in name or "A5000" in name else "24gb-ada"
    return "smaller"


def load_evidence(path: Path | None = None) -> dict[str, Any]:
    return dict(json.loads((path or paths.resource_path("mode-evidence.json")).read_text(encoding="utf-8")))


def family_of(model_name: str, evidence: dict[str, Any]) -> str | None:
    low = model_name.lower().replace("_", "-")
    for fam, d in evidence.get("families", {}).items():
        if any(m in low for m in d.get("match", ())):
            return str(fam)
    return None


def engine_version(caps: EngineCaps | None) -> str:
    """The version the engine rules read: the release recorded beside the binary (EngineCaps.release) where
    known, else what ``--version`` printed ("" without an engine)."""
    if caps is None:
        return ""
    return caps.release or caps.version or "0"


def engine_excludes(generation: Generation, version: str, evidence: dict[str, Any]) -> tuple[set[str], str, str]:
    """Modes this engine cannot run, with the reason and its source. ``version`` "" means no engine is known
    (a generation-wide answer); a version that is no release number ("11207", BeeLlama v0.4.3's own
    ``version: 11207 (ba27edad2)``, or "0" from a source-archive build) is an unknown release."""
    rules = evidence.get("engine_rules", {})
    if generation == Generation.BEE_A:
        r = rules.get("bee-a", {})
        return set(r.get("no", ())), r.get("why", ""), r.get("source", "")
    if generation != Generation.BEE_B or not version:
        return set(), "", ""
    v = parse_version(version)
    r = rules.get("bee-b-before-0.4.4", {})
    if v is None:
        # BeeLlama printed "version: <build> (<commit>)" up to v0.4.4 and "0.4.5-dev build N" since (field notes
        # §1): a bare build number is v0.4.4 or older, so DFlash2 may not load.
        why = (f"this BeeLlama's release is unknown (its --version says {version!r}; BeeDeck's builder and "
               f"downloader record it beside the binary): {r.get('why', '')}")
        return set(r.get("no", ())), why + "; upgrade to BeeLlama v0.4.4 or later", r.get("source", "")
    if v < (0, 4, 4):
        return set(r.get("no", ())), r.get("why", "") + "; upgrade to BeeLlama v0.4.4 or later", r.get("source", "")
    return set(), "", ""


def measured(advice: WorkloadAdvice | None, target_files: Iterable[str]) -> tuple[Mode, str] | None:
    """(mode, why) from BeeDeck's own advice for a setup running one of these target files; the advice
    measures DFlash whichever DFlash file the setup ran, :func:`choose` finds the plan kind it stands for
    (:attr:`ModeInfo.plan_kinds`)."""
    if advice is None:
        return None
    names = {Path(f).name for f in target_files}
    for setup in advice.setups():
        parts = [p.strip() for p in setup.split("|")]
        if len(parts) < 2 or parts[1] not in names:
            continue
        for kind in (CODE, *[k for k in KINDS if k != CODE]):
            v = advice.verdict(setup, kind)
            if v.best is not None:
                return v.best, f"{v.why}, {kind} prompts on {setup}"
    return None


def _own_kind(own: Mode, usable: Sequence[str]) -> str | None:
    """The plan kind among ``usable`` (or "none") that the advice's mode stands for."""
    return next((k for k in own.info.plan_kinds if k in (*usable, "none")), None)


def choose(card: str, generation: Generation, version: str, family: str | None, runnable: Sequence[str],
           evidence: dict[str, Any], own: tuple[Mode, str] | None = None) -> ModeChoice:
    """The fast-path mode among ``runnable`` (kinds that run and fit here) for this card and engine."""
    no, no_why, no_src = engine_excludes(generation, version, evidence)
    engine = generation.value + (f" {version}" if version else "")
    usable = [k for k in runnable if k not in no and k != "none"]
    kind = _own_kind(own[0], usable) if own is not None else None
    if own is not None and kind is not None:
        return ModeChoice(card, engine, kind, "measured", f"BeeDeck's own advice: {own[1]}")
    fam = evidence.get("families", {}).get(family or "", {})
    pub = fam.get("classes", {}).get(card)
    if pub is not None:
        want = pub["mode"]
        if want in usable:
            return ModeChoice(card, engine, want, "published", pub["why"], pub["source"])
        figures = {k: v for k, v in pub.get("figures", {}).items() if k in usable}
        if figures:
            best = max(figures, key=lambda k: figures[k])
            name = KIND_LABEL.get(want, want)
            why = (f"{name} is the published fast path here, but " + (no_why if want in no else
                   f"{name} does not run or fit on this setup") + f"; next best published: "
                   f"{KIND_LABEL.get(best, best)} ({figures[best]} tok/s)")
            return ModeChoice(card, engine, best, "published", why, pub["source"] + (f"; {no_src}" if no_src else ""))
    for k in RULE_ORDER:
        if k in usable:
            why = ("no measured or published figure for this card and model: the target's own MTP head costs no "
                   "download, so it comes first" if k == "mtp" else
                   "no measured or published figure for this card and model: the first runnable kind in "
                   "BeeDeck's order (MTP, DFlash2, DFlash, DSpark, EAGLE-3)")
            if no:
                why += f"; {', '.join(KIND_LABEL.get(k, k) for k in sorted(no))} left out: {no_why}"
            return ModeChoice(card, engine, k, "rule", why, no_src)
    return ModeChoice(card, engine, "none", "rule", "no speculation kind runs and fits on this setup")


def table(family: str, evidence: dict[str, Any], engines: Sequence[tuple[Generation, str]] = TABLE_ENGINES,
          kinds: Sequence[str] | None = None, classes: Sequence[str] = CLASSES,
          own: tuple[Mode, str] | None = None, own_card: str = "") -> list[ModeChoice]:
    """The recommendation for the card classes x these engines, every kind assumed to fit (``kinds``: the
    same for every engine; None: what each generation runs, :data:`TABLE_KINDS`). ``own``: BeeDeck's measured
    advice on this machine (:func:`measured_family`), which holds for its card class ``own_card`` only."""
    return [choose(c, g, v, family, kinds if kinds is not None else TABLE_KINDS.get(g, ()), evidence,
                   own if c == own_card else None)
            for c in classes for g, v in engines]


def measured_family(advice: WorkloadAdvice | None, family: str, evidence: dict[str, Any]) -> tuple[Mode, str] | None:
    """BeeDeck's own advice for any setup whose target file belongs to ``family`` (:func:`measured`)."""
    if advice is None:
        return None
    files = [parts[1] for setup in advice.setups()
             if len(parts := [x.strip() for x in setup.split("|")]) > 1 and family_of(parts[1], evidence) == family]
    return measured(advice, files) if files else None


def ubd_for(card: str, caps: EngineCaps | None, evidence: dict[str, Any] | None = None) -> int | None:
    """-ubd to pass: 64 on 24 GB cards where the probe found the flag; None: leave the engine's default."""
    rule = (evidence if evidence is not None else load_evidence()).get("ubd", {})
    if caps is None or not (caps.has("--spec-draft-ubatch-size") or caps.has("-ubd")):
        return None
    return int(rule.get("value", 64)) if card in rule.get("classes", ()) else None
