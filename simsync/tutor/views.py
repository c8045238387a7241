"""The lesson menu: every lesson with the learner's progress in it."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from simsync.tutor.content import Lesson
from simsync.tutor.progress import Progress

__all__ = ["LessonsView", "current_lesson"]

#: the terminal's width from which the menu shows what each lesson answers whole
WIDE = 120
#: the columns the menu's number, status and borders take beside a lesson's title and what
#: it answers, below :data:`WIDE`
BESIDE = 26


def _cut(text: Text, room: int | None) -> Text:
    """``text`` on one line of ``room`` columns at most (ending in …), or whole (None)."""
    if room is not None:
        text.truncate(max(room, 12), overflow="ellipsis")
    return text


def current_lesson(lessons: list[Lesson], progress: Progress) -> Lesson | None:
    """Where to continue: the first started and unfinished lesson, else the first unfinished."""
    unfinished = [lesson for lesson in lessons if not progress.done(lesson.slug)]
    started = [lesson for lesson in unfinished if progress.step(lesson.slug) > 0]
    candidates = started or unfinished
    return candidates[0] if candidates else None


class LessonsView:
    """``2/3 done`` and a table: number, title, status, what the lesson answers."""

    def __init__(self, lessons: list[Lesson], progress: Progress) -> None:
        self.lessons, self.progress = lessons, progress

    def status(self, lesson: Lesson) -> Text:
        if self.progress.done(lesson.slug):
            return Text("✓ done", style="green")
        step = self.progress.step(lesson.slug)
        if step:  # a lesson shortened since the learner's last visit: its last step
            shown = min(step + 1, len(lesson.steps))
            return Text(f"step {shown}/{len(lesson.steps)}", style="yellow")
        return Text("not started", style="dim")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        done = sum(self.progress.done(lesson.slug) for lesson in self.lessons)
        table = Table(
            title=f"simsync lessons: {done}/{len(self.lessons)} done", title_justify="left"
        )
        table.add_column("#", justify="right")
        table.add_column("lesson")
        table.add_column("status")
        narrow = options.max_width < WIDE
        if not narrow:
            table.add_column("what it answers")
        # below 120 columns what a lesson answers goes under its title, on one line cut to
        # the room the number and the status leave, so that the menu fits a screen of 24
        # rows (a column of its own beside them was cut to 20 characters at 80)
        room = options.max_width - BESIDE if narrow else None
        current = current_lesson(self.lessons, self.progress)
        for lesson in self.lessons:
            marker = " ◀ continue here" if lesson is current else ""
            title = Text(lesson.title + marker)
            answers = _cut(Text(lesson.summary, style="dim"), room)
            if narrow:
                table.add_row(str(lesson.number), Text("\n").join([title, answers]),
                              self.status(lesson))  # fmt: skip
            else:
                table.add_row(str(lesson.number), title, self.status(lesson), answers)
        yield table
