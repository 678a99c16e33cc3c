"""`mirror db import-manifests`: done job rows rebuilt from the manifests in the bucket,
after losing Postgres (every mirrored item has one, written last)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated

import typer

from mirror import wiring
from mirror.cli.context import Context
from mirror.cli.progress_bar import ProgressBar
from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import ValuesRefused
from mirror.domain.manifest import ManifestError, decode_manifest, restored_job
from mirror.domain.objects import prefix_root

if TYPE_CHECKING:  # botocore loads only when a command uses the bucket
    from mirror.db.mirrored import MirroredItems
    from mirror.s3.bucket import Bucket

THREADS = 16  # S3 connections
RESTORERS = 8  # manifests read and restored at once


def register(db_app: typer.Typer, ctx: Context) -> None:
    """Add `import-manifests` to `mirror db`."""

    @db_app.command("import-manifests")
    def import_manifests(
        prefix: Annotated[
            str | None, typer.Option("--prefix", help="Key prefix (default MIRROR_S3_PREFIX).")
        ] = None,
    ) -> None:
        """Rebuild done job rows from the manifests in the bucket (after losing Postgres)."""
        config = ctx.settings()
        mirrored = ctx.database().mirrored
        bucket = wiring.bucket(config, threads=THREADS)
        root = prefix_root(config.s3_prefix if prefix is None else prefix)
        keys = [k for k, _ in bucket.iter_objects(root) if _is_manifest_key(k, root)]
        restored, skipped, unreadable = run_import(bucket, mirrored, keys)
        for line in unreadable:
            typer.echo(f"unreadable manifest {line}", err=True)
        typer.echo(
            f"{len(keys)} manifest(s) under s3://{bucket.name}/{root}: {restored} job(s) "
            f"restored, {skipped} skipped (item already has a job), {len(unreadable)} unreadable"
        )
        if unreadable:
            raise typer.Exit(1)


def run_import(
    bucket: Bucket, mirrored: MirroredItems, keys: list[str]
) -> tuple[int, int, list[str]]:
    """Restore the job of each manifest: (restored, skipped, `key: why` of the unreadable)."""
    restored = skipped = 0
    unreadable: list[str] = []
    with (
        ThreadPoolExecutor(max_workers=RESTORERS) as pool,
        ProgressBar("importing manifests", total=len(keys), in_bytes=False) as (bar, task),
    ):
        for outcome in pool.map(lambda key: _restore(bucket, mirrored, key), keys):
            bar.advance(task)
            if isinstance(outcome, str):
                unreadable.append(outcome)
            elif outcome:
                restored += 1
            else:
                skipped += 1
    return restored, skipped, unreadable


def _restore(bucket: Bucket, mirrored: MirroredItems, key: str) -> bool | str:
    """True: restored; False: the item has a job already; a string: why it is unreadable."""
    try:
        body = bucket.get_bytes(key)
        if body is None:
            return f"{key}: deleted while importing"
        job = restored_job(decode_manifest(body), key)
    except ManifestError as error:
        return f"{key}: {error}"
    except (TypeError, ValueError, KeyError) as error:  # a shape decode let through
        return f"{key}: not a manifest: {type(error).__name__}"
    try:
        return mirrored.restore(job)
    except ValuesRefused as error:  # e.g. a \u0000 in a string, which jsonb refuses
        return f"{key}: Postgres refused its values: {error.detail}"


def _is_manifest_key(key: str, root: str) -> bool:
    """`<root><item_id>/manifest.json` exactly (not a manifest.json deeper down)."""
    rest = key[len(root) :]
    item, _, name = rest.partition("/")
    if name != "manifest.json":
        return False
    try:
        return normalize_item_id(item) == item
    except ValueError:
        return False
