"""Setup, Qt-free: the pipeline that gets a machine from nothing to a saved, checked profile (the engine by a
download, a build or one you have; the target and the draft; the smoke test, the settings re-planned for the
engine and the launch's preflight; the save) as one list of steps that the wizard's run page and ``beedeck
setup`` both run.

``steps`` holds the steps, the run's state (:class:`Setup`) and :func:`run_all`; ``choices`` what a setup was
asked to do (the wizard's pages, or the command's flags), the engines and offers for it and the build's
arguments; ``services`` the core calls the steps make (replaceable in tests).

May import the launcher, the starter, the profile, the models and engine wings, machine and the plumbing; nothing
in core imports it; the ui and the commands do.
"""

from __future__ import annotations

from beedeck.core.setup.choices import WAYS, SetupChoices, build_args, card_of, find_engines, unlisted_offers
from beedeck.core.setup.services import SetupServices
from beedeck.core.setup.steps import (
    STEP,
    STEPS,
    Setup,
    SetupResult,
    Step,
    StepCancelled,
    StepFailed,
    run_all,
)

__all__ = [
    "STEP",
    "STEPS",
    "WAYS",
    "Setup",
    "SetupChoices",
    "SetupResult",
    "SetupServices",
    "Step",
    "StepCancelled",
    "StepFailed",
    "build_args",
    "card_of",
    "find_engines",
    "run_all",
    "unlisted_offers",
]
