"""What the operators of one running query share."""

from __future__ import annotations

import datetime
import errno
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from quanta.client.budgets import Budgets
from quanta.client.requester import Requester
from quanta.client.services import ServiceEndpoint
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.terms import literal

XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


class QueryContext:
    """The requester (every request goes through it), the budgets, the
    SERVICE allowlist, the query's NOW(), and its temporary directory
    (made on first use, removed by `close`)."""

    def __init__(
        self, requester: Requester, dataset: str, budgets: Budgets, services: Mapping[str, ServiceEndpoint]
    ) -> None:
        self.requester = requester
        self.dataset = dataset
        self.budgets = budgets
        self.services = services
        now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        self.now = literal(now, datatype=XSD_DATETIME)  # NOW() is one value per query
        self._temp: Path | None = None
        self.disk_bytes = 0  # written to temporary files in all (the query's disk budget)
        self.disk_held = 0  # of which still on disk, taken from the budgets' disk pool
        self.files = 0
        self.bnodes = 0  # blank nodes made by BNODE() and CONSTRUCT templates
        self.closed = False

    def temp_dir(self) -> Path:
        if self.closed:
            raise QueryError(ErrorKind.INTERNAL, "the query is closed")
        if self._temp is None:
            try:
                self._temp = Path(tempfile.mkdtemp(prefix="quanta-client-", dir=self.budgets.temp_dir))
            except OSError as error:
                raise disk_error(error) from error
        return self._temp

    def next_bnode(self) -> int:
        self.bnodes += 1
        return self.bnodes

    def next_file(self) -> int:
        self.files += 1
        return self.files

    def spilled(self, size: int) -> None:
        """Account for `size` more bytes about to be written to temporary files:
        refused (nothing written) past the query's disk budget or the pool's."""
        if self.disk_bytes + size > self.budgets.disk_bytes:
            raise QueryError(
                ErrorKind.BUDGET_EXCEEDED,
                f"temporary files exceed the query's disk budget of {self.budgets.disk_bytes} bytes",
            )
        pool = self.budgets.disk_pool
        if pool is not None and not pool.take(size):
            raise QueryError(
                ErrorKind.BUDGET_EXCEEDED,
                f"temporary files of all running queries would exceed the service's spill budget of {pool.limit} "
                f"bytes ({pool.used} in use)",
                retry_after_s=1.0,
            )
        self.disk_bytes += size
        self.disk_held += size

    def unspilled(self, size: int) -> None:
        """`size` bytes of temporary files removed (or never written): back to the pool."""
        size = min(size, self.disk_held)
        self.disk_held -= size
        if self.budgets.disk_pool is not None:
            self.budgets.disk_pool.give(size)

    def close(self) -> None:
        """No request is sent after this; temporary files are removed."""
        self.closed = True
        self.requester.close()
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None
        self.unspilled(self.disk_held)


def disk_error(error: OSError) -> QueryError:
    """A temporary file that could not be written: 507 when the disk (or the quota) is full."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return QueryError(ErrorKind.DISK_FULL, f"no room left for the query's temporary files ({error.strerror})")
    return QueryError(ErrorKind.INTERNAL, f"a temporary file failed: {error.strerror}")
