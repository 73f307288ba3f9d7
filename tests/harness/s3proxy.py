"""A real S3 API server for tests: s3proxy (Maven Central ``org.gaul:s3proxy``, its
jar-with-dependencies, fetched by ``scripts/s3-jars.sh s3proxy`` into ``.cache/s3/``) started as a
process on 127.0.0.1 over a directory (jclouds' filesystem provider), with AWS v2/v4 signatures and
one identity. A missing jar or java is an error, not a skip.

Ready means the state the tests need, never a sleep: the process started here answers a
*signed* S3 request on its port (an unsigned one gets an error document: the HTTP server is up),
and a bucket created through the S3 API (``PUT /bucket``) has appeared as a directory of this
server's own storage. That last step also proves the server answering is this one: the port
comes from :func:`harness.kafka.free_port`, and another process on the machine (another test
run's broker, Spark UI or s3proxy) may take it between the probe and s3proxy's bind; then the
start is tried again on another port.

The fixture, one server per test module (import it: ``from harness.s3proxy import s3_server  #
noqa: F401``): ``s3_server`` is a started :class:`S3Proxy` with the bucket :data:`BUCKET`;
``s3_server.env()`` is the standard AWS environment a user would set for an on-premises store
(``AWS_ENDPOINT_URL``, keys, region; the checksum variables left unset, as a new user leaves
them): what the tool under test, run as a subprocess, must take.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.kafka import free_port

REPO = Path(__file__).resolve().parents[2]
S3PROXY_VERSION = os.environ.get("S3PROXY_VERSION", "2.6.0")
START_TIMEOUT_S = 90
IDENTITY = "kla-test-identity"
CREDENTIAL = "kla-test-credential-0123456789"
BUCKET = "audits"
START_ATTEMPTS = 3


class S3ProxyError(RuntimeError):
    pass


class PortTaken(S3ProxyError):
    """Another process answers on the port probed for s3proxy."""


def s3proxy_jar() -> Path:
    jar = REPO / ".cache" / "s3" / f"s3proxy-{S3PROXY_VERSION}.jar"
    if not jar.is_file():
        raise S3ProxyError(f"{jar} is missing: run `bash scripts/s3-jars.sh s3proxy` (scripts/test.sh does); "
                           "these tests do not skip")
    if shutil.which("java") is None:
        raise S3ProxyError("java is not on PATH: s3proxy needs Java 17+")
    return jar


class S3Proxy:
    """One s3proxy process serving ``workdir/data`` on a free port of 127.0.0.1."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.data = self.workdir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The process environment a user of this store sets (plus ``extra``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"AWS_ACCESS_KEY_ID": IDENTITY, "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
                    "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint,
                    # no ~/.aws of the machine's user is read
                    "AWS_CONFIG_FILE": str(self.workdir / "no-aws-config"),
                    "AWS_SHARED_CREDENTIALS_FILE": str(self.workdir / "no-aws-credentials"),
                    "AWS_EC2_METADATA_DISABLED": "true"})
        env.update(extra)
        return env

    def start(self, *buckets: str) -> "S3Proxy":
        """Started, answering signed requests, with ``buckets`` created (:meth:`make_bucket`); on
        another free port when the one probed was taken by another process in the meantime."""
        from harness.tiers import refuse_in_fast_tiers

        refuse_in_fast_tiers("s3proxy (a real S3 API server)")
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_once()
                for bucket in buckets:
                    self.make_bucket(bucket)
                return self
            except PortTaken:
                self.stop()
                if attempt == START_ATTEMPTS:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> "S3Proxy":
        jar = s3proxy_jar()
        self.data.mkdir(parents=True, exist_ok=True)
        props = self.workdir / "s3proxy.conf"
        props.write_text(
            f"s3proxy.endpoint=http://127.0.0.1:{self.port}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={IDENTITY}\n"
            f"s3proxy.credential={CREDENTIAL}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data}\n")
        log = open(self.workdir / "s3proxy.log", "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", str(jar),
             "--properties", str(props)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while (status := self.signed_status("GET", "/")) != 200:
            if self.proc.poll() is not None:
                if "Address already in use" in self.log_tail():
                    raise PortTaken(self.port)
                raise S3ProxyError(f"s3proxy exited with {self.proc.returncode}: {self.log_tail()}")
            if status is not None and status != 503:   # someone else's server on the port
                raise PortTaken(self.port)
            if time.monotonic() > deadline:
                self.stop()
                raise S3ProxyError(f"s3proxy did not answer on {self.endpoint} in {START_TIMEOUT_S} s: {self.log_tail()}")
            time.sleep(0.2)  # polling its answer, not waiting for time to pass
        return self

    def signed_status(self, method: str, path: str) -> int | None:
        """The HTTP status of a request signed with this server's identity (AWS signature v2, which
        s3proxy takes beside v4), None when nothing answers."""
        date = email.utils.formatdate(usegmt=True)
        digest = hmac.new(CREDENTIAL.encode(), f"{method}\n\n\n{date}\n{path}".encode(), hashlib.sha1).digest()
        req = urllib.request.Request(self.endpoint + path, method=method, headers={
            "Date": date, "Authorization": f"AWS {IDENTITY}:{base64.b64encode(digest).decode()}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def answers(self) -> bool:
        """True while the server answers signed requests."""
        return self.signed_status("GET", "/") == 200

    def make_bucket(self, name: str) -> None:
        """Creates the bucket through the S3 API (``PUT /name``) and waits until it is a directory of
        this server's storage (jclouds' filesystem provider): the server that answered is this one."""
        status = self.signed_status("PUT", f"/{name}")
        if status not in (200, 409):   # 409: BucketAlreadyOwnedByYou
            raise S3ProxyError(f"PUT /{name} on {self.endpoint}: HTTP {status}: {self.log_tail()}")
        if not (self.data / name).is_dir():
            raise PortTaken(self.port)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.workdir / "s3proxy.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """One started s3proxy per test module with the bucket :data:`BUCKET` (see the module docstring)."""
    server = S3Proxy(tmp_path_factory.mktemp("s3proxy")).start(BUCKET)
    yield server
    server.stop()
