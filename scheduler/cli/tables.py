"""Tables laid out for the terminal's width, so that ids are never cut.

Left to itself, a rich ``Table`` on a narrow terminal shrinks its wrapping columns alike
and cuts the others with an ellipsis: at 80 columns ``stellwerk jobs`` printed ids as
``48361243-6…``, which cannot be pasted into the next command, and ``show`` folded worker
names into fragments. A :class:`FittedTable` is laid out for the width it is printed at
instead: ids, states and numbers never wrap; the wordy columns give way one after the
other, each down to a floor (``show``'s message first, so that the rest stays readable),
and less useful columns are left out, in an order each table sets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Wide enough for any table unsqueezed: its natural width is measured at this width.
_UNBOUNDED = 100_000


@dataclass(frozen=True)
class Squeeze:
    """Let a column wrap, down to ``floor`` characters wide."""

    header: str
    floor: int


@dataclass(frozen=True)
class LeaveOut:
    """Leave a column out."""

    header: str


Step = Squeeze | LeaveOut


@dataclass
class FittedTable:
    """A table that gives way step by step when the terminal is too narrow.

    ``give_way`` lists what may be done, in order, to fit: the table is laid out with the
    fewest steps that fit, each squeeze going only as far as needed. A column that no
    step squeezes keeps its full width on one line.
    """

    headers: Sequence[str]
    give_way: Sequence[Step] = ()
    right: Collection[str] = ()
    rows: list[tuple[Text, ...]] = field(default_factory=list)

    def add_row(self, *cells: str | Text) -> None:
        """Add a row, one cell per header (a ``str`` is shown as is, not as markup)."""
        self.rows.append(tuple(cell if isinstance(cell, Text) else Text(cell) for cell in cells))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Render as laid out for the width available; say which columns were left out."""
        table = self.layout(console, options)
        yield table
        hidden = [header for header in self.headers
                  if header not in {str(column.header) for column in table.columns}]
        if hidden and self.rows:
            yield Text(f"({', '.join(hidden)} left out to fit {options.max_width} columns: "
                       "widen the terminal, or --json for everything)", style="dim")

    def layout(self, console: Console, options: ConsoleOptions) -> Table:
        """The table for ``options.max_width``, after the fewest steps that make it fit.

        When even all the steps are not enough, rich shrinks what is left.
        """
        for taken in range(len(self.give_way) + 1):
            shown, widths, excess = self._try(console, options, self.give_way[:taken])
            if excess <= 0:
                break
        return self._table(shown, widths)

    def _try(
        self, console: Console, options: ConsoleOptions, steps: Sequence[Step]
    ) -> tuple[list[str], dict[str, int], int]:
        """The columns shown, the squeezed widths and the excess left after ``steps``."""
        left_out = {step.header for step in steps if isinstance(step, LeaveOut)}
        shown = [header for header in self.headers if header not in left_out]
        natural = self._table(shown, {})
        unbounded = options.update_width(_UNBOUNDED)
        excess = Measurement.get(console, unbounded, natural).maximum - options.max_width
        widths: dict[str, int] = {}
        for step in steps:
            if excess <= 0:
                break
            if isinstance(step, Squeeze) and step.header in shown:
                full = self._natural_width(step.header)
                cut = min(excess, max(full - step.floor, 0))
                if cut:
                    widths[step.header] = full - cut
                    excess -= cut
        return shown, widths, excess

    def _natural_width(self, header: str) -> int:
        """The widest line of the column, header included."""
        index = self.headers.index(header)
        lines = [header, *(line for row in self.rows for line in row[index].plain.split("\n"))]
        return max(cell_len(line) for line in lines)

    def _table(self, shown: list[str], widths: Mapping[str, int]) -> Table:
        """A rich table of the shown columns, the squeezed ones at their given width."""
        table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False, padding=(0, 1, 0, 0))
        for header in shown:
            justify: JustifyMethod = "right" if header in self.right else "left"
            if header in widths:
                table.add_column(header, width=widths[header], overflow="fold", justify=justify)
            else:
                table.add_column(header, no_wrap=True, justify=justify)
        columns = [self.headers.index(header) for header in shown]
        for row in self.rows:
            table.add_row(*(row[index] for index in columns))
        return table
