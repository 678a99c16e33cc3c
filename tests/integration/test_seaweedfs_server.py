"""The SeaweedFS server the demo, the tests and the benchmarks start (mirror/demo/seaweedfs.py).

What a newcomer's machine must see: only loopback listeners, a missing bucket refused as
on AWS, data kept over a crash and a restart, and nothing left in /tmp or $TMPDIR.
"""

from __future__ import annotations

import os
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from mirror.demo.seaweedfs import SeaweedServer, weed_binary

LISTEN = "0A"  # TCP state in /proc/net/tcp


def loopback_and_other_listeners(ports: set[int]) -> tuple[set[int], set[int]]:
    """Of `ports`, those listening on 127.0.0.1 and those listening anywhere else."""
    loopback: set[int] = set()
    other: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            port = int(port_hex, 16)
            if fields[3] != LISTEN or port not in ports:
                continue
            (loopback if address == "0100007F" else other).add(port)
    return loopback, other


def test_weed_mini_listens_on_loopback_only_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert os.access(weed_binary(), os.X_OK)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the server inherits it
    server = SeaweedServer(
        tmp_path / "data", access_key_id="key", secret_access_key="secret", buckets=["made"]
    )
    server.start()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="key",
            aws_secret_access_key="secret",
        )
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["made"]
        with pytest.raises(ClientError, match="NoSuchBucket"):  # not made on the fly
            client.put_object(Bucket="missing", Key="k", Body=b"x")
        client.put_object(Bucket="made", Key="k", Body=b"kept")

        ports = server.ports
        loopback, other = loopback_and_other_listeners(ports)
        assert other == set()
        assert loopback == ports

        endpoint = server.endpoint_url
        server.stop(kill=True)
        server.start()
        assert server.endpoint_url == endpoint
        assert client.get_object(Bucket="made", Key="k")["Body"].read() == b"kept"
    finally:
        server.stop()

    assert list(temp.iterdir()) == []
    left = [
        path.name
        for path in Path("/tmp").glob("seaweedfs-*.sock")
        if path.stem.rpartition("-")[2] in {str(port) for port in ports}
    ]
    assert left == []
