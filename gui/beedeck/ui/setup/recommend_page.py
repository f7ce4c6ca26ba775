"""Setup page 2: the recommended pair for the chosen goal, its speculation mode with the evidence behind it,
its download size, memory plan and runner-up."""


from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWizardPage,
)

from beedeck.core.models.recommend.from_catalog import NO_GPU_FOUND, STARTER_CHOSEN, Choice, Recommendation
from beedeck.core.models.recommend.from_catalog import SIDECAR_NOTE_PREFIXES as SIDECAR_PREFIXES
from beedeck.core.models.recommend.live_plan import LABEL
from beedeck.core.models.recommend.mode_choice import EVIDENCE_LABEL, card_class
from beedeck.ui.launch.memory_bar import MemoryBar
from beedeck.ui.setup.detect_page import DetectPage
from beedeck.ui.setup.hub_search import HubSearch
from beedeck.ui.setup.services import WizardServices, gib_text
from beedeck.ui.wrap_label import WrapLabel


class RecommendPage(QWizardPage):
    """Page 2: the recommended pair for a goal, why, its size, its memory plan, and the runner-up."""

    def __init__(self, services: WizardServices, detect_page: DetectPage) -> None:
        super().__init__()
        self.services, self.detect_page = services, detect_page
        self.rec: Recommendation | None = None
        self.choice: Choice | None = None
        self.catalog_read = False  # the catalog's headers were read (or tried) for this wizard run
        self.setTitle("Recommended setup")
        self.setSubTitle("A target model and how it speculates (a draft, or its own MTP head), sized by BeeDeck's "
                         "memory planner.")
        goals = QHBoxLayout()
        goals.addWidget(QLabel("Goal:"))
        self.goal_group = QButtonGroup(self)
        for i, (goal, tip) in enumerate((
                ("quality", "The largest model and quant that still leave 32k context."),
                ("speed", "The fewest weight bytes per token: fastest replies."),
                ("context", "The longest context with a 4-bit-or-better quant."))):
            b = QRadioButton(goal.capitalize())
            b.setToolTip(tip)
            b.setProperty("goal", goal)
            self.goal_group.addButton(b, i)
            goals.addWidget(b)
        goals.addStretch(1)
        self.goal_group.button(0).setChecked(True)
        self.goal_group.idClicked.connect(lambda _i: self.refresh())
        self.title_label = QLabel()
        self.title_label.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.title_label.setWordWrap(True)
        self.size_label = QLabel()
        # The speculation mode and the evidence it was chosen on (BeeDeck's own measurements, or published figures)
        self.mode_label = WrapLabel()
        self.mode_label.setTextFormat(Qt.TextFormat.PlainText)
        self.mode_label.setVisible(False)
        self.reasons_label = WrapLabel()
        self.reasons_label.setTextFormat(Qt.TextFormat.PlainText)
        # Drafts found next to models on disk: the one offered, and why the others are not (sidecars).
        self.drafts_label = WrapLabel()
        self.drafts_label.setTextFormat(Qt.TextFormat.PlainText)
        self.drafts_label.setVisible(False)
        self.memory_bar = MemoryBar()
        self.memory_bar.empty_text = "Runs on the CPU: no GPU memory needed."
        self.runner_label = WrapLabel()
        self.runner_button = QPushButton("Use the runner-up instead")
        self.runner_button.clicked.connect(self._on_runner_clicked)
        runner_row = QHBoxLayout()
        runner_row.addWidget(self.runner_label, 1)
        runner_row.addWidget(self.runner_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addLayout(goals)
        layout.addWidget(self.title_label)
        layout.addWidget(self.size_label)
        layout.addWidget(self.mode_label)
        layout.addWidget(self.reasons_label)
        layout.addWidget(self.drafts_label)
        layout.addWidget(self.memory_bar)
        layout.addLayout(runner_row)
        # Any repo on the Hub, sized from its headers in the background (nothing is downloaded).
        self.hub_search = HubSearch(lambda repo, drafts: services.size(repo, self.detect_page.free_vram(), self.card(),
                                                                    drafts),
                                    lambda rec: rec.report(self.detect_page.free_vram()),
                                    services.runner)
        self.hub_search.chosen.connect(self.use_hub_choice)
        layout.addWidget(QLabel("Or size any GGUF repo on the Hub, with every draft kind, before downloading:"))
        layout.addWidget(self.hub_search)
        layout.addStretch(1)

    def card(self) -> str:
        """The first GPU's card class for the mode advice (mode_choice.card_class)."""
        report = self.detect_page.report
        gpus = report.gpus if report is not None else []
        if not gpus:
            return "smaller"
        return card_class(gpus[0].memory_total, gpus[0].compute_capability, gpus[0].name)

    def goal(self) -> str:
        b = self.goal_group.checkedButton()
        return str(b.property("goal")) if b else "quality"

    def initializePage(self) -> None:
        starter = self.detect_page.use_starter
        for b in self.goal_group.buttons():
            b.setEnabled(not starter)
        self.refresh()

    def refresh(self) -> None:
        vram, goal = self.detect_page.free_vram(), self.goal()
        first = not self.catalog_read and not self.detect_page.use_starter and bool(vram)
        self.catalog_read = self.catalog_read or first
        self.title_label.setText("Reading the catalog's GGUF headers (a few MB, nothing is downloaded)…" if first
                                 else "Working out what fits…")

        card = self.card()
        report = self.detect_page.report
        # Why there is no GPU to plan for, in page 1's terms: the wizard has no field to give GPU memory.
        no_gpu = STARTER_CHOSEN if report is not None and report.has_gpu else NO_GPU_FOUND

        def work() -> Recommendation:
            if first:  # the catalog types no sizes: they come from the headers, read live or from the cache
                self.services.size_catalog(self.services.endpoint)
            # The mode by evidence for this card class; -ubd and the drafter's KVarN for the default engine
            return self.services.recommend(vram, goal, card=card, tune_caps=self.services.tune_caps(),
                                           advice=self.services.advice(), no_gpu=no_gpu)

        self.services.runner(work, self.show_recommendation,
                             lambda exc: self.title_label.setText(f"No recommendation: {exc}"))

    def show_recommendation(self, rec: Recommendation) -> None:
        self.rec = rec
        self._show_choice(rec.primary, rec.reasons)
        runner = rec.runner_up
        self.runner_label.setText(f"Runner-up: {runner.summary()}" if runner else "")
        self.runner_button.setVisible(runner is not None)
        self.runner_label.setVisible(runner is not None)
        self.completeChanged.emit()

    def use_hub_choice(self, choice: Choice) -> None:
        """A setup picked from the Hub search becomes the recommendation (the previous one its runner-up)."""
        before = self.rec.primary if self.rec is not None and self.rec.primary.pair_id != "starter" else None
        self.rec = Recommendation(choice, before, [
            f"You picked {choice.summary()} from the Hub search.",
            f"Sized from {choice.target_repo}'s GGUF headers ({choice.sized_from}), read by range requests: "
            "nothing was downloaded to size it."])
        self.show_recommendation(self.rec)

    def _show_choice(self, choice: Choice, reasons: list[str]) -> None:
        self.choice = choice
        if choice.pair_id == "starter":
            self.title_label.setText(choice.title if choice.title.lower().startswith("starter")
                                     else f"Starter profile: {choice.title}")
            self.size_label.setText("Download: nothing (installed with BeeDeck).")
        elif choice.draft_file is None:  # the target's own MTP head (no draft to download), or no speculation
            self.title_label.setText(f"{choice.title}: {choice.target_quant}, "
                                     f"{choice.settings.ctx_size:,} tokens of context")
            size = choice.download_bytes
            inside = "; its MTP head is inside it: no draft to download" if choice.draft_kind == "mtp" else ""
            self.size_label.setText(f"Download: {gib_text(size)} ({choice.target_file}{inside})" if size
                                    else f"Download: {choice.target_file}{inside}")
        else:
            self.title_label.setText(f"{choice.title}: {choice.target_quant} + {choice.draft_quant} draft, "
                                     f"{choice.settings.ctx_size:,} tokens of context")
            if choice.draft_path is not None:  # a target with its draft next to it, both on disk
                self.size_label.setText(f"Download: nothing ({choice.target_file} and its draft "
                                        f"{choice.draft_file} are already on disk).")
            else:
                size = choice.download_bytes
                self.size_label.setText(f"Download: {gib_text(size)} ({choice.target_file} + {choice.draft_file})"
                                        if size else f"Download: {choice.target_file} + {choice.draft_file}")
        mode = mode_text(choice)
        self.mode_label.setText(mode)
        self.mode_label.setVisible(bool(mode))
        # Plain text: WrapLabel sizes itself from plain-text metrics (the runner-up has its own row).
        drafts = [r for r in reasons if r.startswith(SIDECAR_PREFIXES)]
        self.reasons_label.setText("\n".join(f"• {r}" for r in reasons
                                             if not r.startswith("Runner-up:") and r not in drafts))
        self.drafts_label.setText("Drafts found next to your models:\n" + "\n".join(f"• {r}" for r in drafts)
                                  if drafts else "")
        self.drafts_label.setVisible(bool(drafts))
        self.memory_bar.set_plan(choice.plan)

    def _on_runner_clicked(self) -> None:
        if self.rec is None or self.rec.runner_up is None:
            return
        primary, runner = self.rec.primary, self.rec.runner_up
        self.rec = Recommendation(runner, primary, [f"You picked the runner-up: {runner.summary()}.",
                                                    f"The recommendation was: {primary.summary()}."])
        self.show_recommendation(self.rec)
        self.runner_button.setText("Back to the recommendation")

    def isComplete(self) -> bool:
        return self.choice is not None


def mode_text(choice: Choice) -> str:
    """The choice's speculation mode and the evidence it was chosen on ("" for a choice without a mode: the
    starter, a draft found on disk)."""
    m = choice.mode
    if m is None or choice.pair_id == "starter":
        return ""
    label = LABEL.get(choice.draft_kind, choice.draft_kind)
    evidence = f"{EVIDENCE_LABEL.get(m.evidence, m.evidence)}: {m.why}" + (f" (source: {m.source})" if m.source else "")
    cost = ""
    if choice.cost_tokens is not None and choice.draft_kind not in ("", "none"):
        cost = (f" It costs about {round(choice.cost_tokens / 1000)}k tokens of context here." if
                choice.cost_tokens >= 500 else " It costs no context here.")
    if choice.draft_kind == m.mode:
        return f"Speculation: {label}, the fast path on this card and engine by {evidence}.{cost}"
    return (f"Speculation: {label} (your pick).{cost} The fast path here would be "
            f"{LABEL.get(m.mode, m.mode)}, by {evidence}.")
