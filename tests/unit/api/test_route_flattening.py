"""The API's routes are added to one router (``api_router``) with every setting kept."""

from __future__ import annotations

from fastapi import APIRouter, status
from fastapi.routing import APIRoute
from pydantic import BaseModel

from scheduler.api.routes import _add_routes, _route_settings


class _Made(BaseModel):
    id: int


def _source() -> APIRouter:
    source = APIRouter(prefix="/things", tags=["things"])

    @source.post("", status_code=status.HTTP_201_CREATED, response_model=_Made,
                 summary="Make", response_description="Made", deprecated=True,
                 operation_id="make_thing", include_in_schema=False, max_body_size=10)
    async def make() -> dict[str, int]:
        """Make a thing."""
        return {"id": 1}

    return source


def test_every_setting_of_a_route_is_kept() -> None:
    source = _source()
    router = APIRouter()
    _add_routes(router, source)
    (original,), (added,) = source.routes, router.routes
    assert isinstance(original, APIRoute) and isinstance(added, APIRoute)
    differing = [name for name in _route_settings()
                 if getattr(added, name) != getattr(original, name)]
    assert differing == []
    assert (added.path, added.status_code, added.max_body_size) == ("/things", 201, 10)


def test_protected_routes_need_a_token_and_document_it() -> None:
    router = APIRouter()
    _add_routes(router, _source(), protected=True)
    (added,) = router.routes
    assert isinstance(added, APIRoute)
    assert len(added.dependencies) == 1
    assert 401 in added.responses
    assert added.openapi_extra == {"security": [{"HTTPBearer": []}]}
