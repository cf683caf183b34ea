"""The stall recorder: counts against a task each worker it stalled, in Redis, before the worker ends.

A worker stuck in C code that holds the GIL runs no Python at all, in no thread: neither SIGALRM's
handler nor any thread of its own can write to Redis before faulthandler ends the process
(runner.watchdog). So a process of its own does it, forked at start-up before the worker has a
second thread or a Redis connection (it shares the worker's imports copy-on-write; started afresh,
redis-py's imports alone took 39 MB): the worker tells it, over a pipe, when a task's
watched block starts (`arm <task id> <deadline>`) and ends (`disarm`); if a block is still running
STALL_GRACE_S / 2 after its stall limit (SIGALRM, at the limit, stops any block that runs Python),
the worker is stuck in it: the recorder INCRs `keys.stalls(task id)`, half a second before
faulthandler ends the worker. The deadline is on the monotonic clock that every process of the
machine shares, so a recorder still starting when its worker took a task counts right. The
consumer that reclaims the task reads the count and tells a task that stalled workers (MAX_STALLS)
from one whose workers vanished (MAX_VANISHED).

The recorder ends when the pipe does (its worker exited, was killed, or restarted in place: the
pipe is not inherited across exec), and ignores SIGINT and SIGTERM: a stop is its worker's to make.
A worker killed before the deadline (a crash, a node lost) leaves no record: the deadline had not
passed, so the task had not stalled it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import select
import signal
import time

import redis

from quanta.common import keys
from quanta.common.connect import sync_client
from quanta.common.settings import RedisSettings
from quanta.worker.config import STALL_GRACE_S

log = logging.getLogger("quanta.worker")

# After the stall limit, the recorder waits this long (SIGALRM's hand had it to stop a block that
# runs Python) and records before faulthandler's hand ends the worker (STALL_GRACE_S).
RECORD_AFTER_S = STALL_GRACE_S / 2


class StallRecorder:
    """The worker's end of the pipe (see the module). Create it while the process has one thread."""

    def __init__(self, settings: RedisSettings) -> None:
        read, self._fd = os.pipe()  # not inherited across exec: a restart in place closes it
        gc.freeze()  # the collector in the child would touch (and so copy) every object's page
        self.pid = os.fork()
        if self.pid == 0:  # the recorder: never returns into the worker's code
            code = 1
            try:
                gc.disable()  # it makes no cycles worth collecting
                os.close(self._fd)
                code = serve(read, settings)
            except BaseException:
                log.exception("the stall recorder failed")
            finally:
                os._exit(code)
        os.close(read)
        self._broken = False

    def arm(self, task_id: str, seconds: float) -> None:
        self._send(f"arm {task_id} {time.monotonic() + seconds + RECORD_AFTER_S!r}\n")

    def disarm(self) -> None:
        self._send("disarm\n")

    def _send(self, line: str) -> None:
        try:
            os.write(self._fd, line.encode())  # a line is far below PIPE_BUF: written whole, never blocks
        except OSError as e:
            if not self._broken:  # stalls now count as vanished workers: a higher cap, not a failure
                log.warning("the stall recorder is gone: %s", e)
            self._broken = True

    def close(self) -> None:
        """End the recorder (its pipe) and reap it, so that no zombie outlives a restart in place."""
        with contextlib.suppress(OSError):
            os.close(self._fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def serve(fd: int, settings: RedisSettings) -> int:
    """The recorder's loop: read the worker's lines, record a stall when a deadline passes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    client = sync_client(settings)
    armed: tuple[str, float] | None = None  # the watched task, and when it has stalled its worker
    pending = b""
    while True:
        wait = None if armed is None else max(0.0, armed[1] - time.monotonic())
        readable, _, _ = select.select([fd], [], [], wait)
        if not readable:
            assert armed is not None
            record(client, armed[0])
            armed = None
            continue
        data = os.read(fd, 4096)
        if not data:  # the worker is gone; it may have been killed after the deadline but before we woke
            if armed is not None and time.monotonic() >= armed[1]:
                record(client, armed[0])
            return 0
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            words = line.decode().split()
            if words[:1] == ["arm"] and len(words) == 3:
                armed = (words[1], float(words[2]))
            elif words[:1] == ["disarm"]:
                armed = None


def record(client: redis.Redis, task_id: str) -> None:
    name = keys.stalls(task_id)
    try:
        pipe = client.pipeline(transaction=True)
        pipe.incr(name)
        pipe.expire(name, keys.STALLS_TTL_S)
        count = pipe.execute()[0]
    except redis.RedisError as e:  # the task will count as a vanished worker's: a higher cap
        log.error("could not record the stall of task %s: %s", task_id, e)
        return
    log.error("task %s stalled its worker (stall %d of the task)", task_id, count)
