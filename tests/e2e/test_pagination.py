"""Keyset pages of ``GET /jobs`` from a real ``stellwerk api`` while jobs are being added."""

from __future__ import annotations

import httpx

from tests.integration.api.test_api_pagination import page_while_adding


def test_pages_have_no_duplicates_and_no_gaps_while_jobs_are_added(api: httpx.Client) -> None:
    page_while_adding(api, "/jobs")
