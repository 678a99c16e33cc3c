"""What S3's and boto3's failures mean for a job: permanent (fail now) or transient
(retry later), each as one short line that names the bucket or endpoint, never a secret.
"""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)

from mirror.domain.errors import MirrorError, PermanentError, TransientError

_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "403",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AllAccessDisabled",
        "AccountProblem",
        "ExpiredToken",
        "InvalidToken",
        "InvalidSecurity",
    }
)
# 4xx codes that a later attempt can get past (a 4xx is otherwise permanent).
# BadDigest / XAmzContentSHA256Mismatch: S3 found a part damaged on the way; the file on
# disk is intact, so sending it again can succeed.
_RETRYABLE_4XX_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "NoSuchUpload",
        "OperationAborted",
        "SlowDown",
        "BadDigest",
        "XAmzContentSHA256Mismatch",
    }
)


def translate_error(
    exc: BaseException, action: str, *, bucket: str, region: str, endpoint_url: str
) -> MirrorError:
    """One clear error kind and line for whatever boto3/s3transfer raised."""
    if isinstance(exc, MirrorError):
        return exc
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        where = f" {exc.filename}" if exc.filename else ""
        return TransientError(f"S3 {action} failed: cannot read{where}: {exc.strerror}")
    if isinstance(exc, ClientError):
        code, status = error_code(exc), http_status(exc)
        if code == "NoSuchBucket" or (action == "bucket check" and status == 404):
            return PermanentError(f"S3 bucket '{bucket}' does not exist")
        if code in _DENIED_CODES or status == 403:
            named = f"{code}; " if code and not code.isdigit() else ""
            return PermanentError(
                f"S3 denied access to bucket '{bucket}' ({named}check the credentials and policy)"
            )
        if code in ("301", "PermanentRedirect"):
            return PermanentError(
                f"S3 bucket '{bucket}' is not in region '{region}' (endpoint {endpoint_url})"
            )
        if status is not None and 400 <= status < 500 and code not in _RETRYABLE_4XX_CODES:
            return PermanentError(f"S3 rejected the {action}: {_reason_of(exc)}")
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return PermanentError(f"S3 credentials are missing or incomplete: {exc}")
    if isinstance(exc, ParamValidationError):
        return PermanentError(f"S3 rejected the {action}: {_reason_of(exc)}")
    if isinstance(exc, BotoCoreError) and action == "bucket check":
        return TransientError(f"S3 endpoint {endpoint_url} is unreachable: {_reason_of(exc)}")
    return TransientError(f"S3 {action} failed: {_reason_of(exc)} (endpoint {endpoint_url})")


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int | None:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _reason_of(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        message = exc.response.get("Error", {}).get("Message", "")
        reason = f"{error_code(exc) or http_status(exc)} {message}".strip()
    else:
        reason = str(exc) or type(exc).__name__
    return reason if len(reason) <= 200 else reason[:197] + "..."
