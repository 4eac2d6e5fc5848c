"""The sealing of secure params: round trip, a fresh IV per write, loud key errors."""

import pytest
from pydantic import SecretStr

from common.secure_params import NoSecretKey, SecretBox, WrongSecretKey

VALUE = {"password": "hunter2-correct-horse", "pin": 4711, "nested": {"k": ["ü-\"q\""]}}


def test_a_sealed_value_opens_to_what_was_sealed() -> None:
    box = SecretBox(SecretStr("key one"))
    sealed = box.seal(VALUE)
    assert box.open(sealed) == VALUE
    assert SecretBox("key one").open(sealed) == VALUE  # the same key derives the same box


def test_the_sealed_text_shows_nothing_and_differs_per_write() -> None:
    box = SecretBox("key one")
    first, second = box.seal(VALUE), box.seal(VALUE)
    assert first != second
    for sealed in (first, second):
        assert "hunter2" not in sealed
        assert "4711" not in sealed
        assert "password" not in sealed


def test_another_key_cannot_open_it() -> None:
    sealed = SecretBox("key one").seal(VALUE)
    with pytest.raises(WrongSecretKey, match="another STELLWERK_SECRET_KEY"):
        SecretBox("key two").open(sealed)


def test_a_changed_token_is_refused_not_decrypted() -> None:
    box = SecretBox("key one")
    sealed = box.seal(VALUE)
    flipped = sealed[:40] + ("A" if sealed[40] != "A" else "B") + sealed[41:]
    with pytest.raises(WrongSecretKey):
        box.open(flipped)
    with pytest.raises(WrongSecretKey):
        box.open('{"password": "plain json is no sealed value"}')


@pytest.mark.parametrize("key", [None, "", SecretStr("")])
def test_without_a_key_nothing_is_sealed_or_opened(key: SecretStr | str | None) -> None:
    box = SecretBox(key)
    assert not box.has_key
    with pytest.raises(NoSecretKey, match="STELLWERK_SECRET_KEY"):
        box.seal(VALUE)
    with pytest.raises(NoSecretKey):
        box.open(SecretBox("key one").seal(VALUE))
