"""A real S3 API server on loopback for the object-store tests: ``moto``'s standalone server
(``moto_server``, from the ``moto[server]`` test dependency) in a process of its own. It speaks the
S3 HTTP API, conditional writes included (``If-None-Match: *`` answers 412 on an existing key), so
the tests exercise the same clients (pyarrow's S3 file system, boto3) a real bucket would.

Command line: ``python -m tests.s3_server`` starts one and prints its endpoint until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from typing import Optional

from tests.services import free_port

__all__ = ["S3Server", "BUCKET"]

BUCKET = "warehouse"  # S3 names: 'wh' is refused with InvalidBucketName
ACCESS_KEY, SECRET_KEY = "lakelog-test-key", "lakelog-test-secret-0123456789"


class S3Server:
    """One server: ``start()``, ``options(...)``, ``client()``, ``stop()``."""

    def __init__(self, *, iam: bool = False) -> None:
        """``iam``: the server checks every request against IAM users and their policies (moto's
        ``INITIAL_NO_AUTH_ACTION_COUNT``); ``start()`` then makes an admin user whose keys
        ``options()`` and ``client()`` use, and :meth:`read_only_options` a user that may only read."""
        self.port = 0
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = ""
        self.iam = iam
        self.access_key, self.secret_key = ACCESS_KEY, SECRET_KEY

    @staticmethod
    def unavailable_reason() -> Optional[str]:
        try:
            import boto3  # noqa: F401
            import moto  # noqa: F401
        except ImportError as e:
            return f"{e.name} is not installed (pip install -e '.[test]')"
        return None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        self.port = free_port()
        fd, self.log = tempfile.mkstemp(prefix="lakelog-moto-", suffix=".log")
        exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or "moto_server"
        # with IAM checks, the first three actions pass unchecked: they make the admin user
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"} if self.iam else None
        self.proc = subprocess.Popen(
            [exe, "-H", "127.0.0.1", "-p", str(self.port)], stdout=fd, stderr=fd, start_new_session=True, env=env
        )
        os.close(fd)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()  # noqa: S310
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    with open(self.log, encoding="utf-8", errors="replace") as f:
                        tail = f.read()[-2000:]
                    self.stop()
                    raise RuntimeError(f"moto_server did not start on port {self.port}: {tail}") from None
                time.sleep(0.1)
        if self.iam:
            self.access_key, self.secret_key = self._user("admin", ["*"])
        self.client().create_bucket(Bucket=BUCKET)
        return self

    def _user(self, name: str, actions: list[str]) -> tuple[str, str]:
        """(access key, secret key) of a new IAM user allowed ``actions`` on every resource."""
        import json

        import boto3

        iam = boto3.client("iam", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                           aws_secret_access_key=self.secret_key, region_name="us-east-1")
        iam.create_user(UserName=name)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return str(key["AccessKeyId"]), str(key["SecretAccessKey"])

    def read_only_options(self) -> dict[str, str]:
        """Catalog options of a new user that may list and read the bucket, nothing else (an
        ``iam`` server only)."""
        assert self.iam, "read-only users need S3Server(iam=True)"
        # AWS covers HeadBucket and ListObjectsV2 by s3:ListBucket and HeadObject by s3:GetObject;
        # moto (5.2.6 on) checks each operation under an action of its own name
        actions = ["s3:GetObject", "s3:ListBucket", "s3:HeadBucket", "s3:ListObjectsV2", "s3:HeadObject"]
        access, secret = self._user(f"reader-{uuid.uuid4().hex[:8]}", actions)
        return {**self.options(), "s3.access-key": access, "s3.secret-key": secret}

    def options(self, **extra: str) -> dict[str, str]:
        """Catalog options reaching this server, Paimon's names."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key": self.access_key,
            "s3.secret-key": self.secret_key,
            "s3.path.style.access": "true",
            **extra,
        }

    def warehouse(self) -> str:
        """A fresh warehouse prefix in the bucket."""
        return f"s3://{BUCKET}/wh-{uuid.uuid4().hex[:12]}"

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def keys(self, prefix: str) -> list[str]:
        """Every key under ``s3://bucket/<prefix>``."""
        out: list[str] = []
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        for page in pages:
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
        if self.log:
            with contextlib.suppress(OSError):
                os.remove(self.log)


if __name__ == "__main__":
    server = S3Server().start()
    print(server.endpoint, server.options(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
