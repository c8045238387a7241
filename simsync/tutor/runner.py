"""Running a lesson: show each step, ask the questions, verify on TensorFlow, save progress.

Interactive by default. ``answers`` (a mapping of question id to answer) or ``no_input`` (show
and use the expected answers) run a lesson end to end without a keyboard, for CI, scripts and
instructors. Progress is saved after every step, and after every try and hint of a question; the
learner can stop with ``q`` or Ctrl-C and continue later from the same step, with the tries
already used. Resuming at a question first shows again what it is about: the step before it
that is not a question (a graph, a timeline, an explanation).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from simsync.errors import SimsyncError, printable
from simsync.terminal import pasteable
from simsync.tutor.claims import StepFacts, broken_claims, render
from simsync.tutor.content import STEP_KINDS, Lesson, Step
from simsync.tutor.progress import Progress
from simsync.tutor.questions import (
    MAX_TRIES,
    choice_label,
    expected_answer,
    is_right,
    readable,
    shown,
)
from simsync.words import plural

if TYPE_CHECKING:  # the cross-check imports the simulator: only when a verify step starts
    from pathlib import Path

    from simsync.crosscheck.report import Report
    from simsync.ir import Graph

__all__ = ["LessonRunner", "Outcome", "Quit", "copy_folder"]


class Quit(Exception):
    """The learner asked to stop; progress is already saved."""


@dataclass
class Outcome:
    """How a lesson went: questions asked, right at the first try, right on a retry."""

    asked: int = 0
    right: int = 0
    first_try: int = 0
    finished: bool = False

    @property
    def score(self) -> str:
        """``4/5 first try, 1 on a retry``: a retry is shown, and not counted as a first try.

        >>> Outcome(asked=5, right=5, first_try=4).score
        '4/5 first try, 1 on a retry'
        >>> Outcome(asked=3, right=3, first_try=3).score
        '3/3 first try'
        """
        retried = self.right - self.first_try
        return f"{self.first_try}/{self.asked} first try" + (
            f", {retried} on a retry" if retried else ""
        )


#: How a line inside a block begins (a table's row or border, a timeline's lane, axis,
#: note of folded lanes or legend, a plot's row with its value on the axis: ``  3.043│``):
#: a page is not cut before one, where it can be cut elsewhere.
_INSIDE_A_BLOCK = re.compile(
    # a timeline's folded note, and the lines it wraps onto (its lanes, what is shown)
    r"^(\s*[│┃├┡└┗┘╰║╟]|\s*[\d.,]+[│└]|/|step |sync |ms |\s*┬|… \d+ more device"
    r"|.*(are shown;|every lane|ui\.perfetto\.dev)"
    r"|\S+ waits +[~·]|[A-Z·] [a-z_]+  \S|- waiting at |~ blocked on |lowercase: "
    # the table of a plot's curves, under it: its header, rule and rows (`` C   bounded``)
    r"| curve +run|─+\s*$| [A-Z] {3,}\S"
    # a table's note of what its marks mean (``◀ last in line: …``), under the table
    r"|\s*◀ )"
)
#: The first line of a table's note of a mark (``◀ last in line: …``).
_CAPTION = re.compile(r"^\s*◀ ")


#: the lines of a timeline besides its lanes at 80 columns: its title, step and sync rows,
#: the note of folded lanes (2), the axis (2) and the legend (3)
TIMELINE_LINES = 10
#: The traced steps of a verify step, at most. A tower is named last only when it came last
#: in more steps than chance allows: 9 of 10 (8 of 10 is p = 0.055), but 15 of 20. Lesson
#: 2's slow tower came last in 8 of 10 under load. Its check took as long with 20 (the
#: interleaved rounds take most of the time: 5.2-11.7 s with 10 steps, 5.7-9.5 s with 20, 3
#: runs each of ``crosscheck(slow_tower, warmup=1, fit_cores=True)`` at a load of 2.4-3.1).
VERIFY_STEPS = 20


def page_break(lines: list[str], height: int) -> int:
    """How many of ``lines`` the next page shows: ``height``, or fewer so that the page ends
    where a block (a table, a timeline) has not begun or is over: not below half of it,
    unless the block that begins there fits the next page whole.

    >>> text = ["intro"] * 5 + ["Timeline", "step ├", "/cpu:0 r··", "/gpu:0 FF", "ms 0", "after"]
    >>> page_break(text, 8)  # the timeline goes whole to the next page
    5
    >>> page_break(["intro", "Timeline", *["/gpu:0 FF"] * 7, "after"], 8)  # a short page
    1
    >>> page_break(["line"] * 20, 8)
    8
    >>> page_break(["intro"] * 6 + ["Timing", "┏━━┓", "┃ a┃", "┗━━┛"], 7)  # its title too
    6
    >>> plot = ["Loss", "  3.043│C", "       │DC", "  1.315│ D", "       └┬──", "ms      0"]
    >>> page_break(["intro"] * 4 + plot, 8)  # a plot's rows with its values on the axis
    4
    >>> curves = ["  staleness", " curve   run", "─────", " A       sync", " B       rounds"]
    >>> page_break(["intro"] * 3 + plot + curves, 12)  # the table of curves whole on the next
    9
    >>> table = ["Waits", "┏━━┓", "┃ a┃", "┗━━┛", "◀ last in line: last clearly most", "  often"]
    >>> page_break(["intro"] * 4 + table + ["after"], 9)  # the table's note stays under it
    4
    """
    for cut in range(height, 0, -1):
        if cut < len(lines) and not _inside(lines, cut):
            if cut >= height // 2:
                return cut
            # a short page only where the block that begins at the cut fits the next whole
            end = cut + 1
            while end < len(lines) and _inside(lines, end):
                end += 1
            return cut if end - cut <= height else height
    return height


def _inside(lines: list[str], index: int) -> bool:
    """Whether a page may not begin at ``lines[index]``: a line inside a block, or a
    table's top border under its title (the title's page would leave it alone)."""
    line = lines[index]
    if _INSIDE_A_BLOCK.match(line):
        return True
    if index > 0 and _CAPTION.match(lines[index - 1]) and line[:1] == " " and line.strip():
        return True  # the rest of a table's note, centred under it as its first line is
    title = index > 0 and lines[index - 1].strip() and not _INSIDE_A_BLOCK.match(lines[index - 1])
    return bool(title) and line.lstrip()[:1] in ("┌", "┏", "╭")


class LessonRunner:
    def __init__(
        self,
        lesson: Lesson,
        progress: Progress,
        console: Console,
        *,
        ask: Callable[[str], str] | None = None,
        answers: Mapping[str, Any] | None = None,
        no_input: bool = False,
        verify: bool = True,
    ) -> None:
        self.lesson, self.progress, self.console = lesson, progress, console
        self.verify = verify  # False: the TensorFlow checks are skipped (the simulated parts)
        self.ask = ask or (lambda prompt: console.input(prompt))
        self.answers, self.no_input = answers, no_input
        self.interactive = answers is None and not no_input
        self.outcome = Outcome()
        #: the questions not asked in this run: their program could not be imported
        self.unasked: set[str] = set()

    def run(self, start: int = 0) -> Outcome:
        """Show the steps from ``start`` on; save progress after each."""
        steps = self.lesson.steps
        if self.interactive:
            self._remind(start)
        for index in range(start, len(steps)):
            step = steps[index]
            self._heading(index)
            self._show(step)
            last = index + 1 == len(steps)
            self.progress.reached(self.lesson.slug, index + 1, done=last)
            if self.interactive and not last:  # after a question too: read the explanation
                self._pause()
        self.outcome.finished = True
        answers = self.progress.of(self.lesson.slug)["answers"]
        asked = [
            q
            for q in self.lesson.questions
            if (self.verify or not q.needs_tensorflow) and q.get("id") not in self.unasked
        ]
        self.outcome.asked = len(asked)
        given = [answers.get(q.get("id"), {}) for q in asked]
        self.outcome.right = sum(1 for a in given if a.get("correct"))
        self.outcome.first_try = sum(1 for a in given if a.get("correct") and a.get("tries") == 1)
        return self.outcome

    def _heading(self, index: int, note: str = "") -> None:
        self.console.rule(
            f"[bold]{self.lesson.number}. {self.lesson.title}[/] · "
            f"step {index + 1}/{len(self.lesson.steps)}{note}"
        )

    def _remind(self, start: int) -> None:
        """Resuming at a question: show again the step it is about, the last one before it
        that is not a question (not a TensorFlow check, which takes long to run again)."""
        steps = self.lesson.steps
        if not 0 < start < len(steps) or steps[start].kind != "question":
            return
        index = next((i for i in range(start - 1, -1, -1) if steps[i].kind != "question"), None)
        if index is None or steps[index].needs_tensorflow:
            return
        self._heading(index, " · again")
        self._show(steps[index])
        self._pause()

    def _show(self, step: Step) -> None:
        """Run a step. In a real terminal a step taller than the screen is shown a screenful
        at a time, so nothing scrolls away unread; slow work (TensorFlow, a race) runs first,
        behind its spinner."""
        if step.needs_tensorflow and not self.verify:
            self.console.print(Text(STEP_KINDS[step.kind].skipped, style="dim"))
            return
        prepare, shows = self.SHOWN[step.kind]
        args = (step,) if prepare is None else (step, prepare(self, step))
        failed = len(args) > 1 and isinstance(args[1], SimsyncError)

        def show(*args: Any) -> None:
            shows(self, *args)
            if not failed:  # what it could not compute, its claims cannot either
                self._claims(step)

        if step.kind == "question" or not (self.interactive and self.console.is_terminal):
            show(*args)
            return
        with self.console.capture() as captured:
            show(*args)
        self._page(captured.get())

    def _facts(self, step: Step) -> StepFacts:
        return StepFacts(self.lesson, step)

    def _claims(self, step: Step) -> None:
        """A claim of the step that this run does not bear out is said, never shown as true."""
        for claim in broken_claims(step, self._facts(step)):
            self.console.print(
                Text(f"Note: this run does not bear out the lesson's claim {claim!r}.", "yellow")
            )

    def _say(self, step: Step, text: str | None) -> None:
        """Markdown with its ``{{ facts }}`` computed from the step's run."""
        if text:
            self._markdown(render(text, self._facts(step)))

    def _page(self, text: str) -> None:
        """``text`` a screenful at a time: each page after the first on a cleared screen, and
        a page cut before a block (a table, a timeline), not inside one, where it can be."""
        everything = lines = text.split("\n")
        shown = 0  # lines of the pages shown so far
        while len(lines) > (height := max(self.console.size.height - 2, 5)):
            cut = page_break(lines, height)
            self.console.file.write("\n".join(lines[:cut]) + "\n")
            self.console.file.flush()
            lines, shown = lines[cut:], shown + cut
            if self.ask("[dim]-- more: Enter · q: stop --[/] ").strip() == "q":
                raise Quit
            self.console.clear()
        if shown:  # the last page fills the screen with the lines before it (a learner saw
            # its last 3 lines alone at the top of a cleared screen), begun outside a block
            start = fill = max(shown - (height - len(lines)), 0)
            while start < shown and _inside(everything, start):
                start += 1
            if start == shown and _inside(everything, shown):
                start = fill  # a block across pages (a long listing): filled all the same
            lines = everything[start:]
        self.console.file.write("\n".join(lines))
        self.console.file.flush()

    def _pause(self) -> None:
        if self.ask("[dim]Enter: next step · q: stop (progress is saved)[/] ").strip() == "q":
            raise Quit

    def _markdown(self, text: str | None) -> None:
        if text:
            self.console.print(Markdown(text))

    # -- the kinds of step ------------------------------------------------------------
    def _text(self, step: Step) -> None:
        self._say(step, step.read())

    def _code(self, step: Step) -> None:
        from simsync.viz import CodeView

        title = step.get("title", "")
        if len(title) + 6 > self.console.width:  # a panel's title is cut, never wrapped
            self.console.print(Text(title, style="bold"))
            title = ""
        self.console.print(CodeView(step.read(), title))
        self._say(step, step.get("text"))

    def _prepare_graph(self, step: Step) -> Graph | SimsyncError:
        """The graph a graph step draws: its scenario's, or the one its program builds (run
        in the sandbox and imported: the run the program step shows), folded by name scope."""
        from simsync.patterns import build
        from simsync.scenario import load_scenario
        from simsync.viz import folded_by_scope

        if not step.about_program:
            return build(load_scenario(self.lesson.scenario_path(step)))
        run = self._run_program(*self.lesson.program_setup(step))
        return run if isinstance(run, SimsyncError) else folded_by_scope(run.graph)

    def _graph(self, step: Step, graph: Graph | SimsyncError) -> None:
        from simsync.viz import GraphView

        self._say(step, step.get("text"))
        if isinstance(graph, Exception):
            self.console.print(Text(f"The program could not be imported: {graph}", "yellow"))
            return
        self.console.print(GraphView(graph))  # the slow towers stay unfolded
        source = step.get("program") or self.lesson.scenario_path(step).name
        self._try_it("Try it yourself", ["graph", source])

    def _timeline(self, step: Step) -> None:
        from simsync.scenario import load_scenario
        from simsync.simulation import simulate, summary
        from simsync.viz import SummaryView, Timeline

        self._say(step, step.get("text"))
        path = self.lesson.scenario_path(step)
        sim = simulate(load_scenario(path))
        # the file by the name `simsync lessons copy` gives it, not deep inside the installation
        self.console.print(SummaryView({**summary(sim), "source": path.name}))
        # its lanes fold so that the whole timeline, axis and legend, fits a page
        lanes = max(self.console.size.height - 2 - TIMELINE_LINES, 4)
        self.console.print(
            Timeline(
                sim.trace,
                steps=int(step.get("steps", 2)),
                sync_points=sim.sync_points,
                max_devices=lanes,
            )
        )
        self._try_it("Try it yourself", ["simulate", path.name])

    def _ledger(self, step: Step) -> None:
        from simsync.scenario import load_scenario
        from simsync.simulation import simulate, summary
        from simsync.viz import LedgerView, SummaryView

        self._say(step, step.get("text"))
        path = self.lesson.scenario_path(step)
        sim = simulate(load_scenario(path))
        self.console.print(LedgerView(sim.trace.updates, rows=int(step.get("rows", 12))))
        self.console.print(SummaryView(summary(sim)).staleness_table())
        self._try_it("Try it yourself", ["simulate", path.name])

    def _prepare_race(self, step: Step) -> Any:
        from simsync.scenario import load_scenario
        from simsync.simulation import contest

        with self.console.status("Simulating the runs..."):
            return contest([load_scenario(p) for p in self.lesson.race_paths(step)])

    def _race(self, step: Step, result: Any) -> None:
        from simsync.viz import LossCurves

        self._say(step, step.get("text"))
        names = [p.name for p in self.lesson.race_paths(step)]
        self.console.print(LossCurves(result))
        self._try_it("Race them yourself (add --png race.png for a picture)", ["compare", *names])

    def _try_it(self, title: str, command: list[str]) -> None:
        """How to run ``simsync COMMAND...`` on the learner's own copy of the lesson's files,
        from any folder: each command broken between its words only, so that it can be
        pasted (:func:`~simsync.terminal.pasteable`)."""
        folder = copy_folder(self.lesson)
        self.console.print(Text(f"{title}, on a copy you can change:", style="dim"))
        for words in (
            ["simsync", "lessons", "copy", str(self.lesson.number), str(folder)],
            ["cd", str(folder)],
            ["simsync", *command],
        ):
            for line in pasteable(words, self.console.width, first="  ", indent="      "):
                self.console.print(Text(line, style="dim"), soft_wrap=True)

    def _on_tensorflow(self, what: str, work: Callable[[Callable[[str], None]], Any]) -> Any:
        """``work(progress)`` behind a spinner that says ``what`` runs on TensorFlow and the
        progress it reports (a real cluster says how it is starting); or the error that
        stopped it."""
        try:
            with self.console.status(f"{what} on TensorFlow...") as status:

                def progress(message: str) -> None:  # said once ("TensorFlow: step 74 of")
                    said = message.removeprefix("TensorFlow: ")
                    status.update(Text(f"{what} on TensorFlow: {said}"))

                return work(progress)
        except SimsyncError as error:
            return error

    def _prepare_verify(self, step: Step) -> Report | SimsyncError:
        """The cross-check's report, or the error that stopped it."""
        return self._on_tensorflow(
            "Running the same graph",
            lambda progress: verify_report(self.lesson.scenario_path(step), progress),
        )

    def _prepare_race_verify(self, step: Step) -> Any:
        """The race of the step's scenarios on TensorFlow beside its prediction, or the
        error that stopped it."""
        from simsync.crosscheck.race import race_on_tensorflow
        from simsync.scenario import load_scenario

        def race(progress: Callable[[str], None]) -> Any:
            scenarios = [load_scenario(p) for p in self.lesson.race_paths(step)]
            return race_on_tensorflow(scenarios, on_progress=progress)

        return self._on_tensorflow("Racing the runs", race)

    def _race_verify(self, step: Step, result: Any) -> None:
        from simsync.viz import RaceTable

        self._say(step, step.get("text"))
        if isinstance(result, Exception):
            self.console.print(Text(f"The race on TensorFlow could not run: {result}", "yellow"))
            return
        self.console.print(RaceTable(result.predicted, result.rounds, result.verdict, result.rule))

    def _prepare_program(self, step: Step) -> dict[str, Any] | SimsyncError:
        """What simsync makes of the lesson's program: run in the sandbox, its graph
        imported and simulated (``towers``: replicated to that many), or the error."""
        from simsync.simulation.user_program import program_summary

        speeds = tuple(step.get("speeds", ()))
        run = self._run_program(step.path("file"), step.get("towers"), speeds)
        return run if isinstance(run, SimsyncError) else program_summary(run)

    def _run_program(self, path: Path, towers: int | None, speeds: tuple[float, ...]) -> Any:
        """The lesson's program imported and simulated (:func:`~simsync.tutor.facts.
        program_run`, kept for the steps after), behind a spinner; or the error that stopped
        it."""
        from simsync.tutor.facts import program_run

        try:
            with self.console.status("Running the program to capture the graph it builds..."):
                return program_run(path, towers, speeds)
        except SimsyncError as error:
            return error

    def _program(self, step: Step, result: dict[str, Any] | SimsyncError) -> None:
        from simsync.viz import ProgramView, simulated_line

        self._say(step, step.get("text"))
        if isinstance(result, Exception):
            self.console.print(Text(f"The program could not be imported: {result}", "yellow"))
            return
        name = step.path("file").name
        self.console.print(ProgramView({**result, "source": name}, summary=False))
        self.console.print(Text("  " + simulated_line(result)))
        copyable = bool(result.get("towers_copyable", True))
        self._try_it("Try it yourself", ["simulate", name, *step.try_options(copyable)])

    def _verify(self, step: Step, report: Report | SimsyncError) -> None:
        from simsync.viz import CrossCheckView

        self._say(step, step.get("text"))
        if isinstance(report, Exception):
            self.console.print(
                Text(f"The TensorFlow check could not run: {report}", style="yellow")
            )
            return
        self.console.print(CrossCheckView(report, step.get("findings")))

    def _prepare_question(self, step: Step) -> SimsyncError | None:
        """A question about the graph a program builds: the program imported first, behind
        a spinner, or the error that stopped it (the question is then not asked)."""
        if not step.about_program:
            return None
        run = self._run_program(*self.lesson.program_setup(step))
        return run if isinstance(run, SimsyncError) else None

    def _question(self, step: Step, failed: SimsyncError | None = None) -> None:
        if failed is not None:
            self.console.print(Text(f"The program could not be imported: {failed}", "yellow"))
            self.console.print(
                Text("This question is about the graph it builds: not asked.", style="dim")
            )
            self.unasked.add(step.get("id"))
            return
        expected = expected_answer(self.lesson, step)
        self._say(step, step.get("prompt"))
        for index, choice in enumerate(step.get("choices", [])):
            self.console.print(Text(f"  {choice_label(index)}. {choice}"))
        if step.get("unit"):
            self.console.print(Text(f"(answer in {step.get('unit')})", style="dim"))
        right, tries, given = self._answer(step, expected)
        if not right:
            self.console.print(f"[bold]The answer is {shown(step, expected)}.[/]")
        self._say(step, step.get("explain", "").replace("{answer}", shown(step, expected)))
        self.progress.answered(self.lesson.slug, step.get("id"), given, right, tries)

    def _answer(self, step: Step, expected: Any) -> tuple[bool, int, str]:
        """Ask until right or out of tries; returns (right, tries, last answer). The tries
        used and the hints shown are saved as they happen: a learner who quits and comes back
        has the same tries left, and sees the hints again."""
        hints = [render(hint, self._facts(step)) for hint in step.get("hints", [])]
        if not self.interactive:
            given = (
                str(expected)
                if self.no_input
                else str((self.answers or {}).get(step.get("id"), ""))
            )
            if self.no_input:
                self.console.print(f"expected answer: {shown(step, expected)}")
            right = self._judge(step, expected, given, hints)
            if not right and given.strip() and not readable(step, given):
                self.console.print(Text(f"(Answer with {_wanted(step)}.)", style="dim"))
            return right, 1, given
        slug, question = self.lesson.slug, step.get("id")
        tries, seen = self.progress.pending(slug, question)
        if tries or seen:
            self.console.print(
                Text(f"You have used {plural(tries, 'try', 'tries')} of {MAX_TRIES}.", style="dim")
            )
        for _ in range(min(seen, len(hints))):
            self._hint(hints)
        given = ""
        while tries < MAX_TRIES:
            given = self.ask("Your answer ([dim]? hint · q stop[/]): ").strip()
            if given == "q":
                raise Quit
            if given == "?":
                self._hint(hints)
            elif not readable(step, given):
                self.console.print(Text(f"Please type {_wanted(step)}; ? for a hint."))
                continue
            else:
                tries += 1
                if self._judge(step, expected, given, hints):
                    return True, tries, given
            self.progress.trying(slug, question, tries, len(step.get("hints", [])) - len(hints))
        return False, tries, given

    def _hint(self, hints: list[str]) -> None:
        """The next hint, labelled, whether asked for (``?``) or after a wrong answer."""
        self._markdown(f"**Hint:** {hints.pop(0)}" if hints else "No more hints.")

    def _judge(self, step: Step, expected: Any, given: str, hints: list[str]) -> bool:
        if is_right(step, expected, given):
            self.console.print("[bold green]✓ Right.[/]")
            return True
        self.console.print(
            Text.assemble(("✗ Not quite", "red"), f" ({printable(given or 'no answer')[:60]}).")
        )
        if hints and self.interactive:
            self._hint(hints)
        return False

    #: how each kind of step (:data:`~simsync.tutor.content.STEP_KINDS`) is shown: the slow
    #: work it needs first, behind a spinner (or None), and what shows it, given the step and
    #: that work's result
    SHOWN: ClassVar[dict[str, tuple[Callable[..., Any] | None, Callable[..., None]]]] = {
        "text": (None, _text),
        "code": (None, _code),
        "program": (_prepare_program, _program),
        "graph": (_prepare_graph, _graph),
        "timeline": (None, _timeline),
        "question": (_prepare_question, _question),
        "verify": (_prepare_verify, _verify),
        "ledger": (None, _ledger),
        "race": (_prepare_race, _race),
        "race_verify": (_prepare_race_verify, _race_verify),
    }


def copy_folder(lesson: Lesson) -> str:
    """The folder the lessons suggest for ``simsync lessons copy N DIR``: ``my-lessonN``."""
    return f"my-lesson{lesson.number}"


def verify_report(path: Any, on_progress: Callable[[str], None] | None = None) -> Report:
    """What a lesson's verify step shows: the cross-check of its scenario on TensorFlow, at
    most :data:`VERIFY_STEPS` traced steps after one warm-up, predicted for this machine;
    towers of one client as many as this machine's cores, where it has fewer and no GPU (a
    learner's laptop could not tell towers side by side from towers taking turns
    otherwise)."""
    from simsync.crosscheck import crosscheck
    from simsync.scenario import load_scenario

    scenario = load_scenario(path)
    scenario = scenario.with_run(steps=min(scenario.run.steps, VERIFY_STEPS))
    return crosscheck(scenario, warmup=1, on_progress=on_progress, fit_cores=True).report


def _wanted(step: Step) -> str:
    """What an answer to ``step`` looks like, in the learner's words."""
    if step.get("type") == "numeric":
        unit = f" (in {step.get('unit')})" if step.get("unit") else ""
        return f"a number{unit}"
    if step.get("type") == "choice":
        last = choice_label(max(len(step.get("choices", [])) - 1, 0))
        return f"the letter of a choice (a to {last}) or its text"
    return "an answer"
