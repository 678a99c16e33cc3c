"""The S3 adapter: uploads (storage, the upload run), keys, checksums, the bucket's listing."""
