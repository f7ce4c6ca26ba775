"""First-run setup: what was detected, which pair fits and why, then one button that does the rest.

Page 1 shows the GPU (or why none was found, with a path straight to the starter profile). Page 2
shows the recommended pair for the chosen goal, its download size, its memory plan and the
runner-up. Page 3 (``setup_run_page.py``) gets an engine, downloads the models, smoke-tests and
hands the result to the session through :attr:`SetupWizard.setup_finished`.
"""


from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QWidget,
    QWizard,
)

from beedeck.core.profile import Profile
from beedeck.core.setup import SetupResult
from beedeck.ui.session import Session
from beedeck.ui.setup.detect_page import DetectPage
from beedeck.ui.setup.recommend_page import RecommendPage
from beedeck.ui.setup.services import WizardServices
from beedeck.ui.setup.setup_run_page import RunPage


class SetupWizard(QWizard):
    """The first-run wizard. Signals: ``setup_finished(SetupResult)`` when the
    engine and models are ready and the smoke test passed; the main window starts the server."""

    setup_finished = Signal(SetupResult)

    def __init__(self, services: WizardServices | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services or WizardServices()
        self.setWindowTitle("Set up BeeDeck")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, False)
        self.detect_page = DetectPage(self.services)
        self.recommend_page = RecommendPage(self.services, self.detect_page)
        self.run_page = RunPage(self.services, self.detect_page, self.recommend_page)
        self.run_page.finished_setup.connect(self._on_run_page_finished)
        for page in (self.detect_page, self.recommend_page, self.run_page):
            self.addPage(page)
        self.resize(780, 620)

    def _on_run_page_finished(self, result: SetupResult) -> None:
        self.setup_finished.emit(result)

    def reject(self) -> None:
        self.run_page.shutdown()
        super().reject()


def open_dialog(session: Session, parent: QWidget) -> SetupWizard:
    """The main window's wizard slot: detection through the session's hook, its one AppSettings copy (changed
    and saved by the session when setup completes), the result into :meth:`Session.apply_profile` (saves
    the profile and starts the server)."""
    services = WizardServices(detect=session.detect_hardware, settings=session.app_settings,
                              save_settings=session.save_settings)
    wizard = SetupWizard(services, parent)
    wizard.setup_finished.connect(
        lambda result: session.apply_profile(Profile(result.engine, result.settings, result.label), start=True))
    return wizard
