"""A task's keys read from the text of ``tasks.flow``: parsed once per distinct text."""

from __future__ import annotations

import orjson

from common.domain.flow_spec import FlowNeeds
from scheduler.engine.structure import flow_needs


def test_the_text_reads_as_the_json_did_and_each_text_is_parsed_once() -> None:
    needs = FlowNeeds((("key:db-eu", 2),), ("rate:github", 100, 60.0))
    text = orjson.dumps(needs.to_json()).decode()
    assert flow_needs(text) == needs
    assert flow_needs(text) is flow_needs("" + text)
    assert flow_needs(None) == FlowNeeds()
    assert not flow_needs(None).asks
