"""The ``stellwerk`` command: components, ``up``, and the client commands.

The app is built in :func:`build_app` when the program runs (no module-level app), so
each test can build its own. ``up`` starts its children as ``python -m scheduler.cli.main``.
"""

from __future__ import annotations

import typer

from scheduler.cli import (
    apply,
    components,
    control,
    follow,
    health,
    history,
    jobs,
    limits,
    prune,
    runs,
    schedules,
    subscriptions,
    tokens,
    up,
)


def build_app() -> typer.Typer:
    """The typer app with every command registered."""
    app = typer.Typer(
        name="stellwerk",
        help="Stellwerk, a distributed job scheduler.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
    )
    components.register(app)
    health.register(app)
    up.register(app)
    runs.register(app)
    jobs.register(app)
    apply.register(app)
    history.register(app)
    follow.register(app)
    control.register(app)
    schedules.register(app)
    subscriptions.register(app)
    tokens.register(app)
    limits.register(app)
    prune.register(app)
    return app


def run() -> None:
    """Console-script entry point (``stellwerk``)."""
    build_app()(prog_name="stellwerk")


if __name__ == "__main__":
    run()
