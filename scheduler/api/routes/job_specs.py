"""``POST /job-specs/yaml``: a job spec in YAML, answered as the JSON ``POST /jobs`` takes.

For the web UI's submit form (browsers read JSON, not YAML); the spec itself is checked
only when it is submitted, by ``POST /jobs``. See ``scheduler.services.spec_yaml``.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request

from scheduler.api.deps import scope
from scheduler.services.errors import InvalidInput
from scheduler.services.spec_yaml import spec_from_yaml

router = APIRouter(prefix="/job-specs", tags=["jobs"])

_YAML_BODY: dict[str, Any] = {"requestBody": {
    "required": True,
    "description": "The YAML text (`text/plain` or `application/yaml`, UTF-8).",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}}


@router.post("/yaml", openapi_extra=_YAML_BODY, dependencies=[Depends(scope("job"))])
async def from_yaml(request: Request) -> dict[str, Any]:
    """The mapping the YAML document holds, as JSON (dates as ISO-8601); nothing is stored."""
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(("body",), f"not UTF-8 text (byte {error.start})") from error
    # Off the event loop: a large document takes a while to parse.
    return await anyio.to_thread.run_sync(spec_from_yaml, text)
