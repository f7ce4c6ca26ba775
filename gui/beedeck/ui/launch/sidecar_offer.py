"""The launch form's sidecar offer: when a target is picked, its GGUF header read, and the draft field is
empty, the drafts in the target's folder (``dflash-`` / ``dspark-`` / ``eagle3-`` / ``mtp-`` files, or any draft by its header) are
looked up off the GUI thread, and the best one this engine runs is filled in, with its mode, in a note
the user can undo; the note's tooltip says why each other draft is not used. A target that is no GGUF model
(a text file renamed .gguf) is not looked next to: the launch preflight says what is wrong with it, under
the target field.

Core does the finding (:func:`beedeck.core.models.library.sidecars_next_to`, which checks each draft
against the target) and the choosing (:func:`beedeck.core.models.sidecars.pick`,
:meth:`Sidecar.reason_on` for the probed engine); this widget only watches the form and shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import shiboken6
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models import sidecars
from beedeck.core.models.gguf.reader import read_header
from beedeck.core.models.gguf.type_tables import FILE_TYPES
from beedeck.core.models.header_cache import Read
from beedeck.core.models.library import sidecars_next_to
from beedeck.core.models.sidecars import Sidecar
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.launch.field_editors import put_value
from beedeck.ui.launch.launch_fields import FIELDS
from beedeck.ui.wrap_label import WrapLabel

Found = tuple[list[Sidecar], str]  # the drafts next to the target (ordered), and the target's quant


def find_next_to(target: str) -> Found:
    """Blocking (reads the headers in the target's folder): the drafts there and the target's quant."""
    ftype = read_header(target).metadata.get("general.file_type")
    quant = FILE_TYPES.get(int(ftype), "") if isinstance(ftype, int) else ""
    return sidecars_next_to(target), quant


def choose(sides: list[Sidecar], quant: str, caps: EngineCaps | None) -> tuple[Sidecar | None, list[str]]:
    """The draft to offer (None: none runs here) and, for every other one, why it cannot be used (or
    that it is another choice)."""
    if caps is not None:
        runnable = [s for s in sides if not s.reason_on(caps) and Mode.of_draft_kind(s.kind)]
        best = sidecars.pick(runnable, quant)
    else:
        best = sidecars.pick([s for s in sides if Mode.of_draft_kind(s.kind)], quant)
    others = []
    for s in sides:
        if s is best:
            continue
        why = s.reason_on(caps) if caps is not None else s.reason()
        others.append(f"{s.path.name}: {why}" if why else f"{s.path.name}: also usable ({s.label}, {s.quant}).")
    return best, others


class SidecarOffer(QWidget):
    """A note under the launch form's draft field: "Found dflash-X.gguf next to the model: filled in as
    the DFlash draft. [Undo]". The form tells it :meth:`known` (a profile loaded: no offer) and
    :meth:`target_changed` (every edit); it fills the form's ``draft`` and ``spec_mode`` widgets and calls
    ``changed()`` (the form's re-check).

    ``finder``: the blocking lookup (tests may pass their own); ``runner``: run_in_background.
    """

    def __init__(self, widgets: dict[str, QWidget], changed: Callable[[], None], parent: QWidget | None = None, *,
                 runner: Runner = run_in_background, finder: Callable[[str], Found] = find_next_to) -> None:
        super().__init__(parent)
        self._widgets, self._changed, self._runner, self._finder = widgets, changed, runner, finder
        self._target = ""  # the target last looked at
        self._undo: tuple[str | None, Mode] | None = None
        self.offered: Sidecar | None = None
        self.note = WrapLabel()
        self.note.setObjectName("sidecar-offer")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setToolTip("Clear the draft BeeDeck filled in, and put the mode back")
        self.undo_button.clicked.connect(self._on_undo_clicked)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.note, 1)
        row.addWidget(self.undo_button)
        self._clear()

    def _fill(self, draft: str | None, mode: Mode) -> None:
        specs = {f.name: f for f in FIELDS}
        put_value(self._widgets["draft"], specs["draft"], draft)  # a line edit: no signal when set by code
        put_value(self._widgets["spec_mode"], specs["spec_mode"], mode.value)
        self._changed()

    def known(self, target: str) -> None:
        """A profile was loaded with this target: its draft field is the user's choice, offer nothing."""
        self._target = target
        self._clear()

    def _clear(self) -> None:
        self.offered, self._undo = None, None
        self.note.setText("")
        self.note.setToolTip("")
        self.undo_button.hide()
        self.hide()

    def target_changed(self, s: LaunchSettings, caps: EngineCaps | None, header: Read | None) -> None:
        """The form's settings changed: look next to a newly picked target when the draft field is empty.
        ``header``: what the form's look at the target found, or None while it is being looked at (the form
        calls again once it is)."""
        if s.target == self._target:
            return
        if header is None and s.target:
            return  # judged once its header is read
        self._target = s.target
        self._clear()
        if not s.target or s.draft or header is None or header.info is None:
            return  # no GGUF model (or none there): the preflight says why, under the target field
        target = s.target
        self._runner(lambda: self._finder(target), lambda found: self._on_found(target, s, caps, found),
                     lambda exc: self._on_failed(target, exc))

    def _on_found(self, target: str, s: LaunchSettings, caps: EngineCaps | None, found: Found) -> None:
        if not shiboken6.isValid(self) or target != self._target:
            return  # closed, or another target was picked meanwhile
        sides, quant = found
        if not sides:
            return
        best, others = choose(sides, quant, caps)
        lines = [f"Drafts next to {Path(target).name} that BeeDeck did not pick:", *others] if others else []
        self.note.setToolTip("\n".join(lines))
        self.show()
        if best is None:
            self.note.setText(f"{len(sides)} draft(s) next to {Path(target).name}, none that "
                              f"{'this engine' if caps else 'any engine'} runs with it: {others[0]}")
            return
        mode = Mode.of_draft_kind(best.kind)
        assert mode is not None  # choose() offers only drafts of a mode's kind
        self._undo, self.offered = (s.draft, s.spec_mode), best
        self._fill(str(best.path), mode)
        more = f" {len(others)} other(s): hover for why not." if others else ""
        warn = f" Warning: {best.warnings[0]}" if best.warnings else ""
        self.note.setText(f"Found {best.path.name} next to the model: filled in as the {best.label} draft "
                          f"(mode {mode.label}).{warn}{more}")
        self.undo_button.show()

    def _on_failed(self, target: str, exc: BaseException) -> None:
        if shiboken6.isValid(self) and target == self._target:
            self.note.setText(f"BeeDeck could not look for drafts next to {Path(target).name} ({exc}): pick the "
                              "draft yourself in the Draft field, or leave it empty for Baseline.")
            self.show()

    def _on_undo_clicked(self) -> None:
        if self._undo is None:
            return
        draft, mode = self._undo
        name = self.offered.path.name if self.offered else "the draft"
        self._undo, self.offered = None, None
        self._fill(draft, mode)
        self.note.setText(f"{name} is no longer the draft: the mode is {mode.label} again.")
        self.undo_button.hide()
