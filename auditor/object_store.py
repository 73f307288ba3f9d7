"""Object storage (``s3://``, ``s3a://``) for manifests: one S3 client configured the way every AWS
tool is, and one clear line for every failure (docs/object-storage.md).

Settings come from the environment only, as the AWS CLI and SDKs take them:
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``
(``~/.aws/config`` and ``credentials``), ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``),
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` for an S3-compatible store (Ceph, MinIO,
SeaweedFS, s3proxy, GCS's interoperability endpoint), which is then addressed path-style.

With an endpoint given, ``AWS_REQUEST_CHECKSUM_CALCULATION`` and
``AWS_RESPONSE_CHECKSUM_VALIDATION`` default to ``when_required``: the AWS SDKs' 2025 default
(a CRC checksum on every upload) is refused by many S3-compatible stores
(``XAmzContentSHA256Mismatch``); set them yourself to override.

The driver uses pyarrow's ``S3FileSystem``; Spark the ``s3a`` file system of ``hadoop-aws``, given
the same settings by :func:`spark_s3a_conf` (no ``--conf`` to repeat). Bounded: a request waits
at most :data:`CONNECT_TIMEOUT_S` to connect and :data:`REQUEST_TIMEOUT_S` between bytes, and is
tried :data:`MAX_ATTEMPTS` times; then :class:`ObjectStoreError` names the URL, the endpoint
and the cause. No project import (layer 1).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

SCHEMES = ("s3://", "s3a://")
CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 10.0
MAX_ATTEMPTS = 3
CHECKSUM_VARIABLES = ("AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION")
JARS_ENV = "KAFKA_AUDIT_S3A_JARS"
"""Comma-separated jars (hadoop-aws and the AWS SDK bundle) for Spark's s3a://; default: the ones
``scripts/s3-jars.sh hadoop-aws`` resolved into the checkout's ``.cache/s3/``."""


class ObjectStoreError(OSError):
    """An object store that cannot be used as asked (missing bucket, denied, no answer ...): one line, exit 3."""


def is_url(path) -> bool:
    return "://" in str(path)


def is_s3(path) -> bool:
    return str(path).startswith(SCHEMES)


def s3a_url(url: str) -> str:
    """The URL as Hadoop's s3a file system names it."""
    return "s3a://" + url[len("s3://"):] if url.startswith("s3://") else url


def bucket_key(url: str) -> tuple[str, str]:
    """(bucket, key) of an ``s3://`` / ``s3a://`` URL; ValueError for another scheme or no bucket."""
    if not is_s3(url):
        raise ValueError(f"{url}: not an s3:// or s3a:// URL")
    rest = url.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{url}: no bucket in the URL")
    return bucket, key.strip("/")


@dataclass(frozen=True)
class Settings:
    endpoint: str | None
    region: str
    profile: str | None
    checksum_defaults: tuple[str, ...]
    """The checksum variables this process set (an endpoint given, they were not set)."""

    def where(self) -> str:
        return f"endpoint {self.endpoint}" if self.endpoint else f"AWS S3 in {self.region}"


def settings(env=None) -> Settings:
    """The S3 settings of the environment; with an endpoint, sets the checksum defaults in ``env``."""
    env = os.environ if env is None else env
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    set_now = []
    if endpoint:
        for name in CHECKSUM_VARIABLES:
            if not env.get(name):
                env[name] = "when_required"
                set_now.append(name)
    return Settings(endpoint, region, env.get("AWS_PROFILE") or None, tuple(set_now))


_FILESYSTEMS: dict = {}


def release() -> None:
    """Drops the S3 clients and shuts pyarrow's S3 subsystem down, once, before the interpreter
    exits (registered with atexit by :func:`filesystem`; atexit runs it before pyarrow's own
    finalizer, which is registered earlier). pyarrow's finalizer alone, with clients still
    referenced from a module, can abort the process at exit ("terminate called without an active
    exception", exit -6 after the command's work and output were done): apache/arrow#41087."""
    import gc

    from pyarrow import fs as pafs

    _FILESYSTEMS.clear()
    gc.collect()
    pafs.ensure_s3_finalized()


def filesystem(url: str):
    """(pyarrow file system, path inside it) for an ``s3://`` / ``s3a://`` URL (any other URL:
    pyarrow's own ``FileSystem.from_uri``)."""
    from pyarrow import fs as pafs

    if not is_s3(url):
        return pafs.FileSystem.from_uri(url)
    s = settings()
    bucket, key = bucket_key(url)
    cache_key = (s.endpoint, s.region, s.profile)
    if not _FILESYSTEMS:
        import atexit

        atexit.unregister(release)
        atexit.register(release)
    if cache_key not in _FILESYSTEMS:
        kwargs = dict(region=s.region, connect_timeout=CONNECT_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S,
                      retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS))
        if s.endpoint:
            scheme, _, host = s.endpoint.partition("://")
            kwargs.update(endpoint_override=host.rstrip("/") if host else scheme, scheme=scheme if host else "https")
        _FILESYSTEMS[cache_key] = pafs.S3FileSystem(**kwargs)
    return _FILESYSTEMS[cache_key], f"{bucket}/{key}".rstrip("/")


_CAUSES = (
    ("XAmzContentSHA256Mismatch", "the store refused the upload's checksum: set AWS_REQUEST_CHECKSUM_CALCULATION="
                                  "when_required and AWS_RESPONSE_CHECKSUM_VALIDATION=when_required"),
    ("NO_SUCH_BUCKET", "the bucket does not exist"),
    ("NoSuchBucket", "the bucket does not exist"),
    ("INVALID_ACCESS_KEY_ID", "access denied: the access key is not known to the store (AWS_ACCESS_KEY_ID)"),
    ("SIGNATURE_DOES_NOT_MATCH", "access denied: the secret key does not match (AWS_SECRET_ACCESS_KEY)"),
    ("ACCESS_DENIED", "access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE and the "
                      "bucket's policy)"),
    ("AccessDenied", "access denied (check the credentials and the bucket's policy)"),
    ("Forbidden", "access denied (HTTP 403: check the credentials and the bucket's policy)"),
    ("NETWORK_CONNECTION", f"the endpoint does not answer (tried {MAX_ATTEMPTS} times)"),
    ("curlCode: 28", f"the endpoint does not answer in time (tried {MAX_ATTEMPTS} times)"),
    ("Could not connect", f"the endpoint does not answer (tried {MAX_ATTEMPTS} times)"),
    ("Could not resolve host", "the endpoint's host name does not resolve"),
)


def error(url: str, what: str, exc: BaseException) -> ObjectStoreError:
    """One line: what failed on which URL, against which store, and why (the known causes named)."""
    text = str(exc)
    cause = next((why for needle, why in _CAUSES if needle in text), None)
    if cause is None:
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        cause = first[:300]
    return ObjectStoreError(f"{what} {url}: {cause} ({settings().where()})")


def _call(url: str, what: str, fn, *args):
    try:
        return fn(*args)
    except ObjectStoreError:
        raise
    except (OSError, ValueError) as exc:  # pyarrow raises OSError (FileNotFoundError for a missing key)
        raise error(url, what, exc) from exc


def check_bucket(url: str) -> None:
    """ObjectStoreError unless the URL's bucket exists and answers (the cheapest request first)."""
    from pyarrow import fs as pafs

    fs, _ = filesystem(url)
    bucket, _ = bucket_key(url)
    info = _call(url, "cannot reach", fs.get_file_info, bucket)
    if info.type == pafs.FileType.NotFound:
        raise ObjectStoreError(f"cannot use {url}: bucket {bucket!r} does not exist ({settings().where()})")


@dataclass(frozen=True)
class ObjectInfo:
    url: str
    size: int


def list_objects(url: str) -> list[ObjectInfo]:
    """Every object under the URL's prefix (recursive), with its size; [] when there is none."""
    from pyarrow import fs as pafs

    check_bucket(url)
    fs, path = filesystem(url)
    scheme = url.split("://", 1)[0]
    bucket, key = bucket_key(url)
    selector = pafs.FileSelector(path if key else bucket, recursive=True, allow_not_found=True)
    infos = _call(url, "cannot list", fs.get_file_info, selector)
    return sorted((ObjectInfo(f"{scheme}://{i.path}", i.size) for i in infos if i.type == pafs.FileType.File),
                  key=lambda o: o.url)


def _glob_regex(pattern: str) -> re.Pattern:
    """A glob as ``glob.glob`` reads it: ``*`` and ``?`` never cross a ``/``."""
    out = []
    for part in re.split(r"(\*\*|\*|\?|\[[^\]]*\])", pattern):
        if part == "**":
            out.append(".*")
        elif part == "*":
            out.append("[^/]*")
        elif part == "?":
            out.append("[^/]")
        elif part.startswith("[") and part.endswith("]") and len(part) > 2:
            out.append(fnmatch.translate(part)[4:-3])
        else:
            out.append(re.escape(part))
    return re.compile("".join(out) + r"\Z")


def glob_prefix(pattern: str) -> str:
    """The literal part of a URL glob before its first wildcard, cut at the last ``/``."""
    cut = min((i for i in (pattern.find(c) for c in "*?[") if i >= 0), default=len(pattern))
    return pattern if cut == len(pattern) else pattern[:pattern.rfind("/", 0, cut) + 1]


def match(pattern: str, url: str) -> bool:
    return bool(_glob_regex(pattern.rstrip("/")).match(url.rstrip("/")))


def read_bytes(url: str) -> bytes:
    fs, path = filesystem(url)
    with _call(url, "cannot read", fs.open_input_stream, path, None) as fh:
        return _call(url, "cannot read", fh.read)


def exists(url: str) -> bool:
    from pyarrow import fs as pafs

    fs, path = filesystem(url)
    return _call(url, "cannot reach", fs.get_file_info, path).type == pafs.FileType.File


def open_input(url: str):
    fs, path = filesystem(url)
    return _call(url, "cannot read", fs.open_input_stream, path, None)


def put_file(local: Path, url: str) -> None:
    """Uploads one local file as one object: whole or not at all (an S3 PUT or completed multipart
    upload appears at once; a failed one leaves the previous object or none)."""
    fs, path = filesystem(url)

    def upload():
        with open(local, "rb") as src, fs.open_output_stream(path, compression=None) as out:
            while chunk := src.read(8 << 20):
                out.write(chunk)
    _call(url, "cannot write", upload)


def put_bytes(data: bytes, url: str) -> None:
    fs, path = filesystem(url)

    def upload():
        with fs.open_output_stream(path, compression=None) as out:
            out.write(data)
    _call(url, "cannot write", upload)


def delete(url: str) -> None:
    """Removes one object; an absent one is no error."""
    from pyarrow import fs as pafs

    fs, path = filesystem(url)
    if _call(url, "cannot reach", fs.get_file_info, path).type == pafs.FileType.NotFound:
        return
    _call(url, "cannot delete", fs.delete_file, path)


# ---------------------------------------------------------------------------------------------
# Spark: the same settings for hadoop-aws's s3a file system
# ---------------------------------------------------------------------------------------------


def pyspark_hadoop_version() -> str | None:
    """The Hadoop version of PySpark's own jars (hadoop-client-api-<v>.jar), None without PySpark."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for jar in sorted(Path(list(spec.submodule_search_locations)[0], "jars").glob("hadoop-client-api-*.jar")):
        return jar.name[len("hadoop-client-api-"):-len(".jar")]
    return None


def s3a_jars() -> list[str] | None:
    """hadoop-aws and the AWS SDK bundle for PySpark's Hadoop: :data:`JARS_ENV`, else what
    ``scripts/s3-jars.sh hadoop-aws`` resolved into this checkout's ``.cache/s3/``; None when neither."""
    if os.environ.get(JARS_ENV):
        return [j for j in os.environ[JARS_ENV].split(",") if j]
    version = pyspark_hadoop_version()
    if version is None:
        return None
    listing = Path(__file__).resolve().parents[1] / ".cache" / "s3" / f"hadoop-aws-{version}" / "classpath.txt"
    try:
        jars = [j for j in listing.read_text().strip().split(",") if j]
    except OSError:
        return None
    return jars if jars and all(Path(j).is_file() for j in jars) else None


def spark_s3a_conf(given: dict[str, str] | None = None) -> dict[str, str]:
    """Spark settings that make ``s3a://`` (and ``s3://``) read with this environment's S3 settings:
    the jars (ObjectStoreError when none are known and none were given), the endpoint path-style,
    region, credentials from the environment, bounded retries. ``given`` (``--conf``, spark-submit's)
    wins: only keys it lacks are returned."""
    given = given or {}
    s = settings()
    conf = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.endpoint.region": s.region,
            "spark.hadoop.fs.s3a.attempts.maximum": str(MAX_ATTEMPTS),
            "spark.hadoop.fs.s3a.retry.limit": str(MAX_ATTEMPTS),
            # (hadoop-aws raises an establish timeout below 15 s to 15 s, with a warning; the driver has
            # listed and checked every manifest through pyarrow before Spark reads one)
            "spark.hadoop.fs.s3a.connection.establish.timeout": "15000",
            "spark.hadoop.fs.s3a.connection.timeout": f"{int(REQUEST_TIMEOUT_S * 1000)}"}
    if s.endpoint:
        conf.update({"spark.hadoop.fs.s3a.endpoint": s.endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
                     "spark.hadoop.fs.s3a.connection.ssl.enabled": str(s.endpoint.startswith("https")).lower()})
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:   # (Spark redacts keys matching secret|token|access.key in its UI and logs)
        conf.update({"spark.hadoop.fs.s3a.access.key": key, "spark.hadoop.fs.s3a.secret.key": secret})
        if os.environ.get("AWS_SESSION_TOKEN"):
            conf.update({"spark.hadoop.fs.s3a.session.token": os.environ["AWS_SESSION_TOKEN"],
                         "spark.hadoop.fs.s3a.aws.credentials.provider":
                             "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"})
    elif s.profile:
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = \
            "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider"
    packages = given.get("spark.jars.packages", "") + given.get("spark.jars", "")
    if "hadoop-aws" not in packages:
        jars = s3a_jars()
        if jars is None:
            raise ObjectStoreError(
                "Spark cannot read s3a:// without hadoop-aws and the AWS SDK bundle for its Hadoop "
                f"({pyspark_hadoop_version() or 'PySpark not installed'}): run `bash scripts/s3-jars.sh hadoop-aws` "
                f"in the checkout, set {JARS_ENV} to the jars, or pass --conf spark.jars.packages="
                f"org.apache.hadoop:hadoop-aws:{pyspark_hadoop_version() or '<hadoop version>'}")
        existing = given.get("spark.jars")
        conf["spark.jars"] = ",".join([existing, *jars] if existing else jars)
    return {k: v for k, v in conf.items() if k not in given or k == "spark.jars"}
