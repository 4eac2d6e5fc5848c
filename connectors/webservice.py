"""The ``webservice`` task type: the connector's side of the web-service worker protocol.

The connector POSTs the attempt (:func:`worker_payload`) to the worker's ``url`` with its
``headers`` (the API has merged the worker type's and the job's into them). A 201
means the worker took the task and works on it asynchronously: the attempt is handed
over (a ``started`` result marked ``detached``) and the worker reports log lines,
storage and its outcome to the three signed callback URLs it was given. Any other
answer is read as an ``http`` call's would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
from pydantic import SecretStr, ValidationError

from common.callbacks import CallbackKind, callback_urls
from common.messaging.messages import TaskDispatch
from common.secure_params import SecretBox
from connectors.calls import CallError, call
from connectors.endings import Ending, Finished, HandedOver
from connectors.http_task import call_headers, finished_for, masked
from connectors.params import DEFAULT_CALL_TIMEOUT_S, WebserviceTarget, describe

ACCEPTED = 201
NO_SECRET_KEY = (
    "webservice tasks need STELLWERK_SECRET_KEY on the connector: it signs the "
    "callback URLs the worker reports through"
)


def worker_payload(
    dispatch: TaskDispatch, task_params: dict[str, Any], callbacks: Mapping[CallbackKind, str]
) -> dict[str, Any]:
    """The JSON body the web-service worker receives (docs/decisions.md, "The connector")."""
    return {
        "run_id": str(dispatch.run_id),
        "task_id": str(dispatch.task_run_id),
        "task_name": dispatch.task,
        "attempt": dispatch.attempt,
        "idempotency_key": dispatch.idempotency_key,
        "job": {
            "id": str(dispatch.job_id),
            "name": dispatch.job_name,
            "tenant": dispatch.tenant,
            "params": dispatch.job_params,
        },
        "params": task_params,
        "storage": dispatch.storage,
        "callbacks": dict(callbacks),
    }


class WebserviceTask:
    """The processor of ``webservice``."""

    def __init__(
        self, client: aiohttp.ClientSession, secrets: SecretBox, secret_key: SecretStr | None,
        callback_base: str,
    ) -> None:
        self._client = client
        self._secrets = secrets
        self._secret_key = secret_key
        self._callback_base = callback_base

    async def __call__(self, dispatch: TaskDispatch) -> Ending:
        """Hand the attempt to the worker; 201 hands it over, anything else ends it."""
        if self._secret_key is None or not self._secret_key.get_secret_value():
            return Finished("FAILED", NO_SECRET_KEY)
        try:
            target = WebserviceTarget.model_validate(dispatch.params)
        except ValidationError as error:
            return Finished("REJECTED", f"invalid params: {describe(error, 'params')}")
        headers = call_headers(dispatch, target.headers, self._secrets)
        if isinstance(headers, Finished):
            return headers
        callbacks = callback_urls(
            self._callback_base, self._secret_key, dispatch.run_id, dispatch.task_run_id,
            dispatch.attempt,
        )
        body = worker_payload(dispatch, target.task_params, callbacks)
        ending = await self._post(target.url, headers.headers, body)
        return ending if isinstance(ending, HandedOver) else masked(ending, headers.secrets)

    async def _post(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> Ending:
        """POST the attempt: 201 hands it over, any other answer is mapped."""
        try:
            answer = await call(
                self._client, "POST", url, headers=headers,
                timeout_s=DEFAULT_CALL_TIMEOUT_S, json_body=body,
            )
        except CallError as error:
            message = f"POST {url}: {error}"
            return Finished("FAILED", message, log=(message,))
        if answer.status == ACCEPTED:
            return HandedOver(log=(f"POST {url} -> HTTP 201: the worker took the task",))
        return finished_for("POST", url, answer)
