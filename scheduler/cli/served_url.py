"""Where a ``stellwerk up`` serves, kept in ``<data-dir>/api-url`` while it runs.

``up`` writes the URL once its API answers and deletes it when it stops, so the client
commands on the same machine (``submit``, ``show``...) reach it on whatever ``--port``
it was given, with no option and no variable. ``--api-url`` and ``STELLWERK_API_URL``
still come first.
"""

from __future__ import annotations

from pathlib import Path

URL_FILE = "api-url"


def served_url_path(data_dir: Path) -> Path:
    """Where ``up`` writes the URL it serves on."""
    return data_dir / URL_FILE


def write_served_url(data_dir: Path, url: str) -> None:
    """Record the URL (written whole, then renamed: a reader never sees half of it)."""
    path = served_url_path(data_dir)
    partial = path.with_suffix(".partial")
    partial.write_text(url + "\n", encoding="utf-8")
    partial.replace(path)


def read_served_url(data_dir: Path) -> str | None:
    """The URL a running ``up`` serves on, or ``None`` when none was recorded."""
    try:
        url = served_url_path(data_dir).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return url or None
