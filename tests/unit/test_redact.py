"""The redaction step: every spelling of a configured secret is masked, in text and logs."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from mirror.domain.logs import RedactSecrets
from mirror.domain.redact import (
    MASK,
    forget_secrets,
    hide_url_password,
    redact,
    register_secrets,
    url_password,
)


@pytest.fixture(autouse=True)
def no_secrets_left_behind() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def test_every_spelling_of_a_registered_secret_is_masked() -> None:
    register_secrets(["CANARY'key\\x", None, ""])
    quoted_by_httpx = "Illegal header value b'Token=\"CANARY\\'key\\\\x\"'"
    for text in ("CANARY'key\\x", quoted_by_httpx, "CANARY%27key%5Cx", '"CANARY\'key\\\\x"'):
        assert "CANARY" not in redact(text), text
        assert MASK in redact(text)


def test_the_longer_secret_is_masked_whole_and_short_values_are_left_alone() -> None:
    register_secrets(["mirror", "demo", "CANARY-1", "CANARY-12"])
    assert redact("mirror.worker: key CANARY-12 and CANARY-1, s3://demo") == (
        f"mirror.worker: key {MASK} and {MASK}, s3://demo"
    )


def test_database_url_password_is_found_decoded_and_hidden() -> None:
    url = "postgresql+psycopg2://mirror:CANARY%40pw@db:5432/mirror"
    assert url_password(url) == "CANARY@pw"
    assert url_password("postgresql://mirror@db/mirror") is None
    assert url_password("postgresql://db:notaport/x") is None
    assert hide_url_password(url) == "postgresql+psycopg2://mirror:***@db:5432/mirror"
    assert hide_url_password("postgresql://mirror@db/x") == "postgresql://mirror@db/x"


def test_log_records_pass_through_the_redaction_filter_with_their_tracebacks() -> None:
    register_secrets(["CANARYLOG"])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets())
    logger = logging.getLogger("test.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("retrying: header %r rejected", "Token=CANARYLOG\n")
        try:
            raise ValueError("bad value CANARYLOG")
        except ValueError:
            logger.exception("failed with %s", "CANARYLOG")
        logger.info("stack", stack_info=True, extra={"x": 1})
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    output = stream.getvalue()
    assert "CANARYLOG" not in output
    # the retry line, the error line, and in the traceback the source line and the error
    assert output.count(MASK) == 4
    assert "ValueError: bad value" in output
