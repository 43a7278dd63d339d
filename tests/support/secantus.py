"""A SecantusDB server (MongoDB wire protocol, single-node replica set) for the wire test run.

SecantusDB is GPL-2.0 and is never imported: `make test` installs it into a virtual environment
of its own (`.venv-secantus`) and this module only starts its server binary in a separate
process, on loopback, with in-memory storage, and stops it afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from tests.support.processes import free_port, stop

ROOT = Path(__file__).resolve().parents[2]
#: Where `make test` installs the server; SECANTUSD overrides it.
DEFAULT_BINARY = ROOT / ".venv-secantus" / "bin" / "secantusd-py"
#: The replica set name SecantusDB advertises in `hello`.
REPLICA_SET = "secantus"
START_TIMEOUT_SECONDS = 30.0


def secantus_binary() -> str:
    """The secantusd-py executable, or a RuntimeError saying how to get it."""
    binary = os.environ.get("SECANTUSD") or str(DEFAULT_BINARY)
    if not Path(binary).is_file() and shutil.which(binary) is None:
        raise RuntimeError(f"SecantusDB is not installed at {binary} (make test-store installs it)")
    return binary


def _wait_until_primary(uri: str, process: subprocess.Popen[bytes], log: Path,
                        deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"secantusd exited with {process.returncode}: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        client: MongoClient = MongoClient(uri, serverSelectionTimeoutMS=500)
        try:
            if client.admin.command("hello").get("isWritablePrimary"):
                return
        except PyMongoError:
            time.sleep(0.1)
        finally:
            client.close()
    raise RuntimeError(f"secantusd did not become primary within {START_TIMEOUT_SECONDS:.0f} s")


@contextmanager
def running_secantus(storage_path: str = ":memory:", cache_size: str | None = None
                     ) -> Iterator[str]:
    """Start SecantusDB on a free loopback port and yield its replica-set URI; stop it after.
    `cache_size` ("4G") sizes its WiredTiger cache (1G unless given), as a benchmark whose
    data outgrows the default sizes a mongod's to its working set."""
    binary = secantus_binary()
    port = free_port()
    uri = f"mongodb://127.0.0.1:{port}/?replicaSet={REPLICA_SET}"
    with tempfile.TemporaryDirectory(prefix="secantus-") as workdir:
        log = Path(workdir) / "secantusd.log"
        with log.open("wb") as log_file:
            # cwd: the launcher looks for ./secantusd.toml; an empty folder has none.
            process = subprocess.Popen(
                [binary, "--host", "127.0.0.1", "--port", str(port),
                 "--storage-path", storage_path, "--log-level", "WARNING",
                 *(["--cache-size", cache_size] if cache_size else [])],
                stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir,
            )
        try:
            _wait_until_primary(uri, process, log, time.monotonic() + START_TIMEOUT_SECONDS)
            yield uri
        finally:
            stop(process)
