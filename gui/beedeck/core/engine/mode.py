"""A speculation mode: the one type (:class:`Mode`) and its one table (:data:`MODE_TABLE`).

Everything BeeDeck says or draws about a mode comes from its row: the name a user reads, its colour in
every view (the gauge's arc, the sparkline, the benchmark and tune charts), whether it runs with a
separate draft file and of which kinds, its ``--spec-type``, the word profile.json stores, and the
sentences the toggle and its ``?`` popover show. A new mode is a new member and a new row here;
the rules that decide whether a setup can run it are in ``core/engine/speculation/modes.py``, its
flags per engine in ``core/engine/argv/spec.py`` (a draft-file mode with a plain ``--spec-type``
needs nothing there), the GGUF side of a new draft format in ``core/models/draft_kinds.py``.

A benchmark measures a mode as the toggle serves it, or one :class:`Variant` of it: the in-server
baseline (:data:`IN_SERVER_BASELINE`, the DFlash server asked per request for no drafts), which is no
mode of the toggle.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    """A speculation mode, in the toggle's order. The values are stored (chat database, benchmark JSON, the
    learnt advice): add, never rename. A launch profile stores :attr:`setting` instead (Baseline's is "off")."""

    BASELINE = "baseline"  # no speculation at all
    DFLASH = "dflash"
    EAGLE3 = "eagle3"
    DSPARK = "dspark"
    MTP = "mtp"
    MODEL_FREE = "model-free"  # the n-gram family (and BeeLlama's copyspec): no extra model

    @property
    def info(self) -> ModeInfo:
        return MODE_TABLE[self]

    @property
    def label(self) -> str:
        """The ONE name a user reads for the mode, everywhere (toolbar, footer, gauge, settings, benchmark, docs)."""
        return MODE_TABLE[self].label

    @property
    def a_label(self) -> str:
        """The label with its article: "a DFlash", "an EAGLE-3"."""
        row = MODE_TABLE[self]
        return f"{row.article} {row.label}"

    @property
    def color(self) -> str:
        """Its colour, "#rrggbb", in every view that draws a mode."""
        return MODE_TABLE[self].color

    @property
    def speculates(self) -> bool:
        return self is not Mode.BASELINE

    @property
    def uses_draft_file(self) -> bool:
        """Runs with a separate draft model file (its kinds: :attr:`ModeInfo.draft_kinds`)."""
        return MODE_TABLE[self].draft_file

    @property
    def spec_type(self) -> str | None:
        """Its ``--spec-type`` on BeeLlama >= 0.4 and mainline; None where each engine decides (see the row)."""
        return MODE_TABLE[self].spec_type

    @property
    def setting(self) -> str:
        """The word a launch profile (profile.json, ``--spec``, known-issues.json) stores for it."""
        return MODE_TABLE[self].setting

    @classmethod
    def parse(cls, word: object) -> Mode | None:
        """The mode a stored word names (None for "" or a word no release wrote)."""
        try:
            return cls(str(word)) if word else None
        except ValueError:
            return None

    @classmethod
    def from_setting(cls, word: object) -> Mode | None:
        """The mode a launch profile's word names (:attr:`setting`), None for a word no release wrote."""
        return next((m for m in cls if MODE_TABLE[m].setting == word), None)

    @classmethod
    def of_draft_kind(cls, kind: str | None) -> Mode | None:
        """The mode that runs a draft file of this kind (``core.models.draft_kinds.draft_kind``), None for an
        ordinary model or no kind."""
        return next((m for m in cls if kind and kind in MODE_TABLE[m].draft_kinds), None)

    @classmethod
    def of_plan_kind(cls, kind: str) -> Mode | None:
        """The mode a catalog plan kind (``core.models.recommend.live_plan``: "dflash2", "mtp-head", "none")
        runs as."""
        return next((m for m in cls if kind in MODE_TABLE[m].plan_kinds), None)

    @classmethod
    def of_spec_type(cls, spec_type: str) -> Mode | None:
        """The mode whose own ``--spec-type`` this is ("draft-mtp"); None for one chosen per engine (DFlash's
        spelling, an n-gram type) or an unknown one."""
        return next((m for m in cls if spec_type and MODE_TABLE[m].spec_type == spec_type), None)


@dataclass(frozen=True)
class ModeInfo:
    """One row of :data:`MODE_TABLE`."""

    label: str  # the one name a user reads
    article: str  # "a" or "an" before the label
    color: str  # "#rrggbb"
    setting: str  # the word a launch profile stores
    what: str  # what it does, for the toggle's tooltip ("{spec_type}": the engine's type where it varies)
    needs: str = ""  # what it needs, in a newcomer's words (the "?" popover); "" for nothing
    draft_file: bool = False  # runs with a separate draft file
    draft_kinds: tuple[str, ...] = ()  # the draft kinds (core.models.draft_kinds) a file of which runs as it
    dflash_draft: bool = False  # its draft is in the DFlash architecture (the planner's measured DFlash formulas)
    # --spec-type on BeeLlama >= 0.4 and mainline; None: chosen per engine (DFlash: caps.dflash_spec_type, as
    # BeeLlama 0.1-0.3 spells it "dflash"; N-gram: the best n-gram type the engine has)
    spec_type: str | None = None
    plan_kinds: tuple[str, ...] = ()  # the catalog's plan kinds (core.models.recommend.live_plan) it stands for


MODE_TABLE: dict[Mode, ModeInfo] = {
    Mode.BASELINE: ModeInfo("Baseline", "a", "#7f8c9a", "off", "no speculation: the target decodes every token "
                            "itself.", plan_kinds=("none",)),
    Mode.DFLASH: ModeInfo("DFlash", "a", "#e0a100", "dflash", "a DFlash draft proposes a block of tokens that the "
                          "target checks in one pass.", "a small DFlash draft model trained for your model",
                          draft_file=True, draft_kinds=("dflash", "dflash-draft"), dflash_draft=True,
                          plan_kinds=("dflash2", "dflash", "dflash-draft")),
    Mode.EAGLE3: ModeInfo("EAGLE-3", "an", "#d9534f", "eagle3", "an EAGLE-3 draft proposes tokens from the target's "
                          "hidden states.", "a small EAGLE-3 draft model trained for your model", draft_file=True,
                          draft_kinds=("eagle3",), spec_type="draft-eagle3", plan_kinds=("eagle3",)),
    Mode.DSPARK: ModeInfo("DSpark", "a", "#e07b00", "dspark", "a DSpark draft (DFlash with a Markov head) proposes a "
                          "block of tokens.", "a small DSpark draft model trained for your model", draft_file=True,
                          draft_kinds=("dspark",), dflash_draft=True, spec_type="draft-dspark",
                          plan_kinds=("dspark",)),
    Mode.MTP: ModeInfo("MTP", "an", "#2e9e5b", "mtp", "the target's own MTP heads propose the next tokens: no draft "
                       "file.", "a model with built-in prediction heads (MTP), or the separate head file made for it",
                       draft_kinds=("mtp",), spec_type="draft-mtp", plan_kinds=("mtp", "mtp-head")),
    Mode.MODEL_FREE: ModeInfo("N-gram", "an", "#3d8bd9", "model-free", "guesses tokens from text already in the "
                              "context ({spec_type}); no extra model.",
                              "nothing extra: it reuses text already in the chat"),
}
if list(MODE_TABLE) != list(Mode):  # a member without its row, or rows out of the toggle's order
    raise RuntimeError("MODE_TABLE needs one row per Mode, in Mode's order")


@dataclass(frozen=True)
class Variant:
    """What a benchmark measured and a speed figure is of: a mode as the toggle serves it, or a variant of it.

    The one variant is the in-server baseline (:data:`IN_SERVER_BASELINE`): Baseline on the DFlash server,
    asked per request for no drafts (the draft stays loaded), which is what the toggle's per-request Baseline
    runs at. Stored as :attr:`key`: the mode's value, or "baseline-draft-loaded".
    """

    mode: Mode
    draft_loaded: bool = False

    def __post_init__(self) -> None:
        if self.draft_loaded and self.mode is not Mode.BASELINE:
            raise ValueError(f"only Baseline has a draft-loaded variant, not {self.mode.label}")

    @property
    def key(self) -> str:
        return f"{self.mode.value}-draft-loaded" if self.draft_loaded else self.mode.value

    @property
    def label(self) -> str:
        return f"{self.mode.label} (draft loaded)" if self.draft_loaded else self.mode.label

    @property
    def color(self) -> str:
        """Its mode's colour (a view may shade a variant, never give it another colour)."""
        return self.mode.color

    @property
    def rank(self) -> tuple[int, bool]:
        """Its place in the toggle's order, a variant right after its mode."""
        return list(Mode).index(self.mode), self.draft_loaded

    @classmethod
    def of(cls, what: Mode | Variant) -> Variant:
        """A mode as its plain variant (a variant as it is)."""
        return what if isinstance(what, Variant) else cls(what)

    @classmethod
    def parse(cls, word: object) -> Variant | None:
        """The variant a stored word names (a mode's value, or "baseline-draft-loaded"); None for another word."""
        text = str(word or "")
        if text == IN_SERVER_BASELINE.key:
            return IN_SERVER_BASELINE
        mode = Mode.parse(text)
        return cls(mode) if mode is not None else None


IN_SERVER_BASELINE = Variant(Mode.BASELINE, draft_loaded=True)

__all__ = ["IN_SERVER_BASELINE", "MODE_TABLE", "Mode", "ModeInfo", "Variant"]
