"""The setup pipeline as steps: get the engine (a prebuilt download, a build, or one you have), fetch the target
and the draft, smoke-test the engine and check the launch (the settings re-planned for that engine, then the
launch's own preflight), and save. One list, :data:`STEPS`: the wizard's run page runs it a step at a time through
its task runner (Retry resumes at the step that failed), ``beedeck setup`` runs it in a row (:func:`run_all`).

A step says whether it is skipped for this setup (:meth:`Step.skipped`), runs with plain callbacks
(``on_progress(done, total)``, a build's ``(done, total, seconds left)``; ``on_line(text)``) and a cancel event
(:meth:`Step.run`), and fails with :class:`StepFailed`, whose ``failure`` is the project's
:class:`~beedeck.core.engine.logparse.ServerFailure` (code, message, remedy); a cancelled step raises
:class:`StepCancelled` and keeps what it got (a download's ``.part`` file, the build folder).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import starter
from beedeck.core.download import DownloadError
from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.building import BuildError
from beedeck.core.engine.caps import EngineCaps, ProbeError
from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD
from beedeck.core.engine.launch_settings import LaunchSettings, SettingsError
from beedeck.core.engine.logparse import ServerFailed, ServerFailure, as_failure
from beedeck.core.engine.registry import EngineError, EngineRecord
from beedeck.core.engine.releases import ReleaseError
from beedeck.core.launcher import preflight
from beedeck.core.models.recommend.from_catalog import tune_for_files
from beedeck.core.profile import Profile, ProfileError
from beedeck.core.settings import load_settings, try_save
from beedeck.core.setup.choices import SetupChoices, build_args
from beedeck.core.setup.services import SetupServices

Progress = Callable[..., None]  # (done, total) or a build's (done, total, seconds left)
Line = Callable[[str], None]
# What a step's calls raise about what the user can act on; anything else is a bug and surfaces as one.
EXPECTED: tuple[type[BaseException], ...] = (
    EngineError, BuildError, ReleaseError, DownloadError, ProbeError, starter.StarterMissing, ServerFailed,
    ProfileError, SettingsError, OSError)


class StepFailed(RuntimeError):
    """Step ``step`` could not finish: ``failure`` says what happened and what to do."""

    def __init__(self, step: str, failure: ServerFailure) -> None:
        super().__init__(str(failure))
        self.step, self.failure = step, failure


class StepCancelled(RuntimeError):
    """The cancel event was set while step ``step`` ran; what it got so far is kept, so running it again resumes."""

    def __init__(self, step: str) -> None:
        super().__init__(f"{step}: cancelled")
        self.step = step


@dataclass
class SetupResult:
    """What a setup produced: launch ``engine`` (its binary) with ``settings`` (the main window's Profile)."""

    engine: str
    settings: LaunchSettings
    label: str = ""
    engine_id: str = ""


class Setup:
    """One setup run: its choices, the core calls, and what the steps found so far (the engine, the model files,
    the settings re-planned for the engine). Steps run one at a time, on any thread."""

    def __init__(self, choices: SetupChoices, services: SetupServices) -> None:
        self.choices, self.services = choices, services
        self.engine: EngineRecord | None = None
        self.paths: dict[str, str] = {}
        self.tuned: LaunchSettings | None = None  # the choice re-planned for the engine (retune)

    def steps(self) -> list[Step]:
        """The steps this setup runs, in order (the skipped ones left out)."""
        return [s for s in STEPS if not s.skipped(self)]

    def launch_settings(self) -> LaunchSettings:
        """The settings the setup saves: the starter's, or the pick's (re-planned for the engine) on the files
        the steps got; a setting named outright wins."""
        if self.choices.starter:
            return starter.StarterProfile(Path(self.engine.binary if self.engine else ""),
                                          Path(self.paths["target"])).settings(**self.choices.overrides)
        s = LaunchSettings.from_dict((self.tuned or self.choices.settings()).to_dict())
        for key, value in self.choices.overrides.items():
            setattr(s, key, value)
        s.target, s.draft = self.paths["target"], self.paths.get("draft")
        return s

    def retune(self, caps: EngineCaps | None, on_line: Line) -> None:
        """Re-plan -ubd and the drafter's KVarN cache for the engine now known, from the files' own headers (the
        recommendation may have been made for another engine or none)."""
        self.tuned = None
        if self.choices.starter or caps is None:
            return
        self.tuned, line = tune_for_files(self.choices.settings(), caps, self.choices.card, self.paths["target"],
                                          self.paths.get("draft"), self.choices.free_vram())
        if line:
            on_line(line)

    def result(self) -> SetupResult:
        engine = self.need_engine("save")
        return SetupResult(engine.binary, self.launch_settings(), engine.name or engine.id, engine.id)

    def need_engine(self, step: str) -> EngineRecord:
        if self.engine is None:
            raise StepFailed(step, ServerFailure("no_engine", "There is no engine yet.",
                                                 "Run the engine step first (Set up again)."))
        return self.engine


StepWork = Callable[[Setup, Progress, Line, threading.Event], str]


@dataclass(frozen=True)
class Step:
    """One step: ``work`` does it and returns a line that says what it did; ``skip`` says whether this setup
    leaves it out; ``remedy`` is what to do when it fails for a reason its error does not name; ``here``: it
    changes the caller's own settings, so it runs on the caller's thread (the save)."""

    key: str
    title: str
    work: StepWork
    skip: Callable[[Setup], bool] = lambda _setup: False
    remedy: str = ""
    starter_title: str = ""  # its title for the starter profile, where another
    here: bool = False

    def skipped(self, setup: Setup) -> bool:
        return self.skip(setup)

    def title_for(self, choices: SetupChoices) -> str:
        return self.starter_title if self.starter_title and choices.starter else self.title

    def run(self, setup: Setup, *, on_progress: Progress, on_line: Line, cancel_event: threading.Event) -> str:
        """Do the step (blocking). Raises StepFailed, or StepCancelled once ``cancel_event`` is set."""
        try:
            return self.work(setup, on_progress, on_line, cancel_event)
        except StepFailed:
            if cancel_event.is_set():
                raise StepCancelled(self.key) from None
            raise
        except EXPECTED as exc:
            if cancel_event.is_set():
                raise StepCancelled(self.key) from exc
            if isinstance(exc, ServerFailed) or hasattr(exc, "remedy"):
                raise StepFailed(self.key, as_failure(exc)) from exc
            raise StepFailed(self.key, ServerFailure(f"setup_{self.key}", str(exc) or type(exc).__name__,
                                                     self.remedy)) from exc


# -- the steps -----------------------------------------------------------------------------------------
def get_engine(setup: Setup, on_progress: Progress, on_line: Line, cancel: threading.Event) -> str:
    c, sv = setup.choices, setup.services
    if c.engine == BUILD:  # the builder reports (done, total, seconds left)
        res = sv.build_engine(**build_args(c, sv.registry), on_progress=on_progress, on_line=on_line,
                              cancel_event=cancel)
        if not res.ok or res.record is None:
            raise StepFailed("engine", ServerFailure("engine_smoke", res.smoke.message if res.smoke
                                                     else "The build produced no engine.", ""))
        record = res.record
    elif c.engine == DOWNLOAD:
        offer = c.offers[DOWNLOAD] if c.offers is not None else None
        if c.offers is None or offer is None or offer.choice is None:
            raise StepFailed("engine", ServerFailure(
                "no_release", offer.why if offer else "No release was looked up for this machine.",
                "Look it up again (the wizard: Back, then Next; or run `beedeck setup` again)."))
        report = c.report
        record = sv.download_engine(  # the release the offer named (its tag), not whatever is newest by now
            repo=offer.choice.repo, tag=offer.choice.tag, backend=offer.backend,
            cuda_driver_version=report.cuda_driver_version if report else None, api_url=c.offers.api_url,
            on_progress=on_progress, on_line=on_line, cancel_event=cancel, registry=sv.registry)
        if not record.ready:  # registered, so the engine list shows it, but not what this needs
            why = record.smoke.message if record.smoke else "its smoke test failed"
            raise StepFailed("engine", ServerFailure(
                "engine_smoke", f"Downloaded {offer.choice.asset.name}, but it is not ready: {why}", ""))
    elif c.engine_path:
        record = sv.registry.add_existing(c.engine_path)
    else:
        record = sv.registry.get(c.engine_id)
    setup.engine = record
    return f"{record.name or record.id}: {record.generation} {record.version}".strip()


def get_model(which: str) -> StepWork:
    def work(setup: Setup, on_progress: Progress, on_line: Line, cancel: threading.Event) -> str:
        c, sv = setup.choices, setup.services
        if c.starter:
            path = sv.starter_model()
            setup.paths["target"] = str(path)
            return f"{path.name} (installed with BeeDeck)"
        choice = c.choice
        assert choice is not None
        on_disk = choice.target_path if which == "target" else choice.draft_path
        if on_disk is not None:  # a target with its draft beside it: the recommender found both on disk
            if not on_disk.is_file():
                raise StepFailed(which, ServerFailure("model_missing", f"{on_disk} is gone since the recommendation.",
                                                      "Get a new recommendation (the wizard: Back; or run "
                                                      "`beedeck setup` again)."))
            setup.paths[which] = str(on_disk)
            return f"on disk: {on_disk}" + (" (found next to the model)" if which == "draft" else "")
        repo = choice.target_repo if which == "target" else choice.draft_repo
        filename = choice.target_file if which == "target" else choice.draft_file
        assert repo and filename
        local = sv.find_local(repo, filename)
        if local is not None:
            setup.paths[which] = str(local.path)
            return f"found {local.path}"
        on_line(f"downloading {repo}/{filename}")
        got = sv.download_model(repo, filename, dest_dir=sv.models_dir(), endpoint=sv.endpoint,
                                on_progress=on_progress, cancel_event=cancel)
        setup.paths[which] = str(got[0])
        return f"downloaded to {got[0]}"

    return work


def smoke_and_check(setup: Setup, on_progress: Progress, on_line: Line, cancel: threading.Event) -> str:
    """The engine's smoke test, the settings re-planned for it, then the launch's own preflight (files, mode,
    guard, kernels, the memory this machine has)."""
    engine, c = setup.need_engine("smoke"), setup.choices
    res = setup.services.smoke_test(engine.binary, expect_gpu=c.gpu and not c.starter)
    if not res.ok:
        raise StepFailed("smoke", ServerFailure("engine_smoke", res.message, ""))
    caps = engine.engine_caps()
    setup.retune(caps, on_line)
    if caps is not None:
        report = c.report
        checked = preflight(caps, setup.launch_settings(),
                            devices=[g.memory_free for g in report.gpus] or None if report else None,
                            host_ram=report.system.ram_total if report else None)
        if not checked.ok or checked.argv is None:
            raise StepFailed("smoke", as_failure(LaunchRefused(checked.refusals)))
        on_line("command: " + checked.argv.command_line(engine.binary))
    return res.message


def save(setup: Setup, on_progress: Progress, on_line: Line, cancel: threading.Event) -> str:
    """The app's settings (first run done, the profile, the engine, the goal), and the profile where the caller
    saves it here (the command; the wizard's session saves it once the launch passed its preflight)."""
    result, sv = setup.result(), setup.services
    app = sv.settings if sv.settings is not None else load_settings()
    app.first_run_done = True
    app.last_profile = result.settings.to_dict()
    app.last_engine = result.engine
    app.default_engine_id = result.engine_id
    app.goal = setup.choices.goal
    problem = sv.save_settings(app) if sv.save_settings is not None else try_save(app)
    said = "settings saved"
    if problem:
        said = "settings not saved"
        on_line(f"BeeDeck's settings could not be saved ({problem}): the setup applies to this session, and the "
                "setup wizard opens again when the app starts.")
    if sv.save_profile is not None:
        where = sv.save_profile(Profile(result.engine, result.settings, result.label))
        said += f"; profile saved to {where}"
    return said


def _no_draft(setup: Setup) -> bool:
    return setup.choices.no_draft


AGAIN = "Try again: a download resumes where it stopped."
STEPS: tuple[Step, ...] = (
    Step("engine", "Engine", get_engine,
         remedy="Try again, or get the engine another way: a prebuilt download, a build, or a llama-server you have."),
    Step("target", "Target model", get_model("target"), remedy=AGAIN, starter_title="Starter model"),
    Step("draft", "Draft model", get_model("draft"), _no_draft, remedy=AGAIN),
    Step("smoke", "Smoke test", smoke_and_check,
         remedy="Get an engine built for this machine, or pick other settings."),
    Step("save", "Save", save, remedy="Make BeeDeck's config folder writable (or free some space), then try again.",
         here=True),
)
STEP = {s.key: s for s in STEPS}


def run_all(setup: Setup, *, on_progress: Progress, on_line: Line, cancel_event: threading.Event,
            on_step: Callable[[Step, int, int], None] | None = None,
            on_done: Callable[[Step, str], None] | None = None) -> SetupResult:
    """Every step of ``setup`` in a row (``on_step(step, number, of)`` before each, ``on_done(step, line)``
    after); raises the first StepFailed, or StepCancelled."""
    steps = setup.steps()
    for i, step in enumerate(steps, 1):
        if cancel_event.is_set():
            raise StepCancelled(step.key)
        if on_step is not None:
            on_step(step, i, len(steps))
        line = step.run(setup, on_progress=on_progress, on_line=on_line, cancel_event=cancel_event)
        if on_done is not None:
            on_done(step, line)
    return setup.result()
