"""The URL a browser fetches an object from: presigned, or plain for a public bucket.

`mirror serve` and the worker reach S3 at MIRROR_S3_ENDPOINT_URL, which in a compose
stack is a name only the stack resolves (`http://seaweedfs:8333`). A browser reaches the
same server elsewhere (MIRROR_S3_PUBLIC_URL: a published port, a reverse proxy, a CDN),
so its links are made for that address.

SigV4 signs the Host header and the path, so a presigned URL is signed by a client whose
endpoint is the public origin itself. A public URL with a path (`https://media.example/s3`,
a reverse-proxy location) is signed without the path, which is then put in front of the
URL's own: the proxy strips it and passes the request on with the browser's Host header,
and S3 sees exactly the request that was signed (README, "Playing an item from the
bucket").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Long enough to watch a film with pauses; the player reloads playlists when it starts.
PRESIGN_EXPIRY_S = 6 * 3600

ObjectLink = Callable[[str], str]  # an object's key -> the URL a browser fetches


def presigned_links(
    client: S3Client, bucket: str, *, path_prefix: str = "", expiry_s: int = PRESIGN_EXPIRY_S
) -> ObjectLink:
    """Presigned GET URLs from `client`; `path_prefix` goes in front of the signed path."""

    def link(key: str) -> str:
        url: str = client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expiry_s
        )
        if not path_prefix:
            return url
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path=path_prefix + parts.path))

    return link


def public_client(
    public_url: str,
    *,
    region: str,
    access_key_id: str | None,
    secret_access_key: str | None,
) -> tuple[S3Client, str]:
    """A client that only presigns (it never connects) for the public URL's origin, and
    the public URL's path (`/s3` of `https://media.example/s3`, else "")."""
    parts = urlsplit(public_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    config = Config(region_name=region, signature_version="s3v4", s3={"addressing_style": "path"})
    client = boto3.client(
        "s3",
        endpoint_url=origin,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        config=config,
    )
    return client, parts.path.rstrip("/")


def plain_links(public_url: str, bucket: str) -> ObjectLink:
    """Unsigned URLs `<public url>/<bucket>/<key>` (path style) of a public bucket."""
    base = public_url.rstrip("/")

    def link(key: str) -> str:
        return f"{base}/{quote(bucket)}/{quote(key)}"

    return link
