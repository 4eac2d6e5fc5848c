"""The JSON Schema of a map of HTTP request headers, as the published API states it.

Subscriptions' webhooks and web-service worker types each check their headers in a
validator (names that are RFC 9110 tokens, none the sender sets itself, one-line values);
the same rules written as a schema let a client generated from the OpenAPI document know
them (issue 14). The validators stay the rule: their messages name the header at fault.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]"


def any_case(text: str) -> str:
    """A regex of ``text`` in any case: JSON Schema patterns take no flags."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)


def headers_schema(
    *, reserved: Iterable[str], reserved_prefixes: Iterable[str] = (), max_headers: int,
    max_name_chars: int, max_value_chars: int,
) -> dict[str, Any]:
    """``maxProperties``, ``propertyNames`` and the values' schema of such a map."""
    refused = [{"pattern": f"^{any_case(name)}$"} for name in sorted(reserved)]
    refused += [{"pattern": f"^{any_case(prefix)}"} for prefix in reserved_prefixes]
    return {
        "maxProperties": max_headers,
        "propertyNames": {"pattern": f"^{TOKEN}{{1,{max_name_chars}}}$",
                          "not": {"anyOf": refused}},
        "additionalProperties": {"type": "string", "maxLength": max_value_chars,
                                 "pattern": "^[^\\r\\n\\u0000]*$"},
    }
