"""A real S3 API server for tests: s3proxy (Maven Central ``org.gaul:s3proxy``, its
jar-with-dependencies, fetched by ``scripts/s3-jars.sh s3proxy`` into ``.cache/s3/``) started as a
process on 127.0.0.1 over a directory (jclouds' filesystem provider), with AWS v2/v4 signatures and
one identity. Readiness is its own HTTP answer (an S3 error document for an unsigned request),
never a sleep. A missing jar or java is an error, not a skip.

``S3Proxy.env()`` is the standard AWS environment a user would set for an on-premises store
(``AWS_ENDPOINT_URL``, keys, region): what the tool under test must take.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.kafka import free_port

REPO = Path(__file__).resolve().parents[2]
S3PROXY_VERSION = os.environ.get("S3PROXY_VERSION", "2.6.0")
START_TIMEOUT_S = 90
IDENTITY = "kla-test-identity"
CREDENTIAL = "kla-test-credential-0123456789"


class S3ProxyError(RuntimeError):
    pass


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

    def start(self) -> "S3Proxy":
        from harness.tiers import refuse_in_fast_tiers

        refuse_in_fast_tiers("s3proxy (a real S3 API server)")
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
        while not self.answers():
            if self.proc.poll() is not None:
                raise S3ProxyError(f"s3proxy exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise S3ProxyError(f"s3proxy did not answer on {self.endpoint} in {START_TIMEOUT_S} s: {self.log_tail()}")
            time.sleep(0.2)  # polling its HTTP answer, not waiting for time to pass
        return self

    def answers(self) -> bool:
        """True once the server answers HTTP at all (an unsigned request gets an S3 error document)."""
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def make_bucket(self, name: str) -> None:
        """A bucket is a directory of jclouds' filesystem provider."""
        (self.data / name).mkdir(parents=True, exist_ok=True)

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
