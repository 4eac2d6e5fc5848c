"""The page at the root: what runs here and where the API is (the web UI is issue 6).

Self-contained HTML: no CDN, no assets, so it works on a machine without internet.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stellwerk</title>
<style>body{{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;line-height:1.5}}
code{{background:#eee;padding:0 .2rem}}</style></head>
<body><h1>Stellwerk</h1>
<p>The scheduler is running. The web UI is not built yet; meanwhile use the CLI
(<code>stellwerk submit</code>, <code>show</code>, <code>watch</code>) or the REST API.</p>
<ul><li>REST API: <code>{base}</code> (bearer token)</li>
<li>OpenAPI document: <a href="{base}/openapi.json">{base}/openapi.json</a></li>
<li>Health: <a href="{base}/healthz">{base}/healthz</a></li></ul>
</body></html>
"""


def landing_router(base: str) -> APIRouter:
    """A router serving the landing page at ``/`` under the path prefix."""
    router = APIRouter(include_in_schema=False)
    page = PAGE.format(base=base)

    @router.get("/", response_class=HTMLResponse)
    def landing() -> str:
        return page

    return router
