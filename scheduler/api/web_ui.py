"""The web UI: its page at ``/`` and its files at ``/ui/<name>``, under the path prefix.

The UI is plain HTML, CSS and ES-module JavaScript shipped in the package
(``scheduler/ui/static``): nothing is built at install time and nothing is loaded from
outside (docs/decisions.md, "The web UI"), so it works on a machine without internet.
Only the files present in
that folder when the app is created are served (a fixed table: no path from the URL
ever reaches the file system). The page is told where the API is through a ``<meta>``
tag, so the scripts work behind any ``STELLWERK_PATH_PREFIX``.
"""

from __future__ import annotations

import hashlib
import html
import mimetypes
from dataclasses import dataclass
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import Response

from scheduler.services.errors import NotFound

INDEX = "index.html"
# Everything the page uses comes from here; the token lives in sessionStorage, so no
# script from anywhere else, and no inline script or style, may ever run on the page.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_TYPES = {
    ".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    """One file of the UI: its bytes, media type and entity tag."""

    body: bytes
    media_type: str
    etag: str

    @classmethod
    def of(cls, name: str, body: bytes) -> Asset:
        """An asset named ``name`` (its suffix gives the media type)."""
        suffix = name[name.rfind("."):]
        media_type = _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "text/plain"
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        return cls(body, f"{media_type}; charset=utf-8", etag)

    def response(self, request: Request, headers: dict[str, str] | None = None) -> Response:
        """200 with the body, or 304 when the browser has this version already."""
        # no-cache: revalidated on each load, so an upgrade shows at once (a 304 is cheap).
        common = {"ETag": self.etag, "Cache-Control": "no-cache", **(headers or {})}
        if request.headers.get("if-none-match") == self.etag:
            return Response(status_code=304, headers=common)
        return Response(self.body, media_type=self.media_type, headers=common)


def load_assets() -> dict[str, Asset]:
    """Every file of ``scheduler/ui/static`` by name (read once, when the app is created)."""
    folder = files("scheduler.ui").joinpath("static")
    return {
        item.name: Asset.of(item.name, item.read_bytes())
        for item in folder.iterdir() if item.is_file() and not item.name.startswith(".")
    }


def render_index(template: bytes, prefix: str, api_base: str) -> bytes:
    """The page with the UI's and the API's locations filled in."""
    text = template.decode("utf-8")
    text = text.replace("%%UI_BASE%%", html.escape(f"{prefix}/ui"))
    return text.replace("%%API_BASE%%", html.escape(api_base)).encode("utf-8")


def web_ui_router(prefix: str, api_base: str) -> APIRouter:
    """The page at ``<prefix>/`` and its files at ``<prefix>/ui/<name>``.

    Include it with ``prefix`` as the router prefix; ``api_base`` is ``<prefix>/api/v1``.
    """
    router = APIRouter(include_in_schema=False)
    assets = load_assets()
    page = Asset.of(INDEX, render_index(assets.pop(INDEX).body, prefix, api_base))
    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "no-referrer"}

    @router.get("/")
    def index(request: Request) -> Response:
        return page.response(request, headers)

    @router.get("/ui/{name}")
    def asset(name: str, request: Request) -> Response:
        found = assets.get(name)
        if found is None:
            raise NotFound("file", name)
        return found.response(request, {"X-Content-Type-Options": "nosniff"})

    return router
