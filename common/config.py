"""Configuration from ``STELLWERK_*`` environment variables (pydantic-settings).

Built by :func:`load_settings` in each runtime's entry point, never at import time, so
that tests and ``stellwerk up`` can hand every process its own values.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.egress import EgressPolicy


class Settings(BaseSettings):
    """Everything a Stellwerk process may be configured with."""

    model_config = SettingsConfigDict(env_prefix="STELLWERK_", extra="ignore")

    database_url: str | None = None
    redis_url: str | None = None
    data_dir: Path = Path(".stellwerk")
    # Set by ``stellwerk up`` for its children: the supervisor's status file, which the
    # API's ``GET /healthz`` reads to report crash-looping components.
    supervisor_status: Path | None = None
    admin_token: SecretStr | None = None
    secret_key: SecretStr | None = None
    api_url: str = "http://127.0.0.1:8080"
    # The API as web-service workers reach it, up to ``/api/v1``, for their callback
    # URLs; unset: ``api_url`` + ``path_prefix`` + ``/api/v1``.
    callback_url: str | None = None
    token: SecretStr | None = None
    path_prefix: str = ""
    disable_cron: bool = False
    # Durations carry their unit in the name, so that ``STELLWERK_LEASE_TTL_S=5`` reads
    # plainly in an environment; code uses the ``timedelta`` properties below.
    # A dead worker's attempts are requeued once both its lease and its liveness key
    # (``LIVENESS_TTL``, 6 s) have lapsed: within about 7 s. A live worker's lease is
    # never taken from it (``scheduler.beat.attempts``), so a short lease is safe; it
    # costs one heartbeat message per running attempt every 2 s.
    lease_ttl_s: float = 6.0
    heartbeat_interval_s: float = 2.0
    cancel_grace_s: float = 30.0
    beat_interval_s: float = 1.0
    # The engine applies at most this many messages per transaction; while it is behind
    # (messages were queued when it asked, and it was busy most of the last second), a
    # batch of fewer than 16 waits this long to grow. At 250 cron fires a second, 8 ms took the
    # engine's CPU a fire from 2.2 to 1.5 ms and the worker's from 1.5 to 1.0 ms, for
    # 4-12 ms more lateness; a message that finds the engine waiting never waits.
    engine_batch_size: int = 500
    engine_batch_wait_ms: float = Field(default=8.0, ge=0)
    # Dispatches of one type made together travel in bundles of at most this many (1:
    # never); a worker hands back what a bundle has not started after the spill delay.
    dispatch_bundle_size: int = 32
    bundle_spill_after_ms: float = 200.0
    # Limits on what the API accepts (docs/decisions.md, "Limits"): a request body larger
    # than this is 413; a params, secure params or storage object larger than this
    # (as compact JSON) is 422 naming it.
    api_max_body_bytes: int = 1024 * 1024
    api_max_params_bytes: int = 64 * 1024
    # A log line per request from uvicorn. Off by default: at 1,000 requests a second it
    # is 5-7% of a read's API CPU (``bench/README.md``); a proxy in front usually logs.
    api_access_log: bool = False
    # The notify runner (docs/decisions.md, "Notify"): a delivery is tried at most
    # ``webhook_max_attempts`` times, the n-th retry after ``webhook_retry_base_s`` *
    # 2^(n-1) (at most ``webhook_retry_max_s``, jittered down to half), each POST given
    # ``webhook_timeout_s``; ``notify_concurrency`` deliveries at once per runner.
    webhook_max_attempts: int = 12
    webhook_retry_base_s: float = 5.0
    webhook_retry_max_s: float = 3600.0
    webhook_timeout_s: float = 10.0
    notify_concurrency: int = 16
    # The egress policy (``common.egress``, docs/decisions.md "Egress policy"): CIDRs and
    # host names, comma-separated, that calls made for users may reach although they are
    # loopback or private. ``stellwerk up`` allows loopback; nothing else does.
    egress_allow: str = ""
    # Retention (docs/decisions.md, "Retention (issue 14)"): the beat deletes finished
    # runs older than this many days (0: keep everything), with their task runs,
    # journal and logs, but never the last ``retention_keep_runs`` runs of a job.
    retention_days: float = Field(default=30.0, ge=0)
    retention_keep_runs: int = Field(default=10, ge=0)

    @field_validator("egress_allow")
    @classmethod
    def _egress_allow_parses(cls, value: str) -> str:
        EgressPolicy.parse(value)  # a typo stops the process at start, naming the entry
        return value

    @property
    def egress(self) -> EgressPolicy:
        """The egress policy of every call made for a user (webhooks, http, webservice)."""
        return EgressPolicy.parse(self.egress_allow)

    @property
    def lease_ttl(self) -> timedelta:
        """How long an ACTIVE attempt may go without a heartbeat before it is presumed lost."""
        return timedelta(seconds=self.lease_ttl_s)

    @property
    def heartbeat_interval(self) -> timedelta:
        """How often a worker renews the lease of a running attempt."""
        return timedelta(seconds=self.heartbeat_interval_s)

    @property
    def cancel_grace(self) -> timedelta:
        """How long a canceled ACTIVE task may take to stop before it is CANCELED anyway."""
        return timedelta(seconds=self.cancel_grace_s)

    @property
    def beat_interval(self) -> timedelta:
        """The beat's tick."""
        return timedelta(seconds=self.beat_interval_s)

    @property
    def engine_batch_wait(self) -> timedelta:
        """How long the engine waits for more messages before committing a batch."""
        return timedelta(milliseconds=self.engine_batch_wait_ms)

    @property
    def bundle_spill_after(self) -> timedelta:
        """How long a worker runs a bundle's attempts one by one before sharing the rest.

        Engines read it too: a flow lane holds what begins within it (``flow_gate``).
        """
        return timedelta(milliseconds=self.bundle_spill_after_ms)

    @property
    def webhook_retry_base(self) -> timedelta:
        """The wait before a delivery's first retry; it doubles with each further one."""
        return timedelta(seconds=self.webhook_retry_base_s)

    @property
    def webhook_retry_max(self) -> timedelta:
        """The longest wait between two tries of a delivery."""
        return timedelta(seconds=self.webhook_retry_max_s)

    @property
    def webhook_timeout(self) -> timedelta:
        """How long one webhook POST may take before it counts as failed."""
        return timedelta(seconds=self.webhook_timeout_s)

    @property
    def retention(self) -> timedelta | None:
        """How old a finished run may get before the beat deletes it; None: never."""
        return timedelta(days=self.retention_days) if self.retention_days > 0 else None

    @property
    def callback_base(self) -> str:
        """Where the callback URLs handed to web-service workers point (``.../api/v1``)."""
        return self.callback_url or f"{self.api_url.rstrip('/')}{self.path_prefix}/api/v1"

    def require_urls(self) -> tuple[str, str]:
        """Both server URLs; the caller must have resolved embedded servers first."""
        if not self.database_url or not self.redis_url:
            raise RuntimeError("STELLWERK_DATABASE_URL and STELLWERK_REDIS_URL are not resolved")
        return self.database_url, self.redis_url


def load_settings(**overrides: object) -> Settings:
    """Read the environment, with explicit overrides winning."""
    return Settings(**overrides)  # type: ignore[arg-type]
