"""Shared fixtures live in tests/fixtures/, one module per real service."""

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.media",
    "tests.fixtures.jellyfin",
    "tests.fixtures.s3",
    "tests.fixtures.s3_checksums",
    "tests.fixtures.stack",
    "tests.fixtures.tcp_proxy",
]
