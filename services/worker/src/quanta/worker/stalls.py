"""The stall recorder: the watchdog's GIL-free hand. It counts a stall against its task in Redis,
then ends the worker, with every thread's stack printed.

A worker stuck in C code that holds the GIL runs no Python at all, in no thread: neither SIGALRM's
handler (runner.watchdog's first hand) nor any thread of its own can write to Redis or end the
process. So a process of its own does both, forked at start-up before the worker has a second
thread or a Redis connection (it shares the worker's imports copy-on-write; started afresh,
redis-py's imports alone took 39 MB).

What is watched is in shared memory, not sent: an anonymous shared `mmap` made before the fork,
which the worker writes when a watched block starts (`arm`: the task id, the stall limit and when
the block reaches it) and ends (`disarm`). A write is a few stores, no system call: before, each
task sent an `arm` and a `disarm` line down a pipe, and woke this process twice (two context
switches per task: ~10% of a small query's worker time on 2 cores), and armed faulthandler's
watchdog thread, which CPython starts anew at each arm and wakes and joins at each cancel (~26%).
The worker writes under a sequence lock: the sequence number is odd while a write is in progress
and changes with every write, so a read that overlapped one (a torn read) is seen and read again;
and the recorder acts only on a block it read the same twice, a millisecond apart (Python has no
memory barriers: a processor that reorders stores, unlike x86's, could show a new sequence number
before the rest for a moment).

Why not faulthandler's watchdog thread armed rarely (one deadline kept far off, re-armed when a
task could outlast it)? It would have to be cancelled before everything that may block, the
consumer's blocking read first, which under one-after-another small queries is every task; and
armed through the idle time instead, it would end a stuck worker only as late as the idle loop's
longest turn (Redis timeouts, backoff sleeps: seconds). The recorder already runs, needs no GIL,
and acts on the limit of the very block that stalls.

The recorder does not poll: a block armed after it last looked reaches its limit no sooner than
the stall limit later, so it sleeps until the watched block's record time, or at most the stall
limit + RECORD_AFTER_S when none is watched (about one wake-up per stall limit, 5 s by default).
If the block it saw is still the one armed STALL_GRACE_S / 2 after its limit (SIGALRM, at the
limit, stops any block that runs Python), the worker is stuck in it: the recorder INCRs
`keys.stalls(task id)`, and at STALL_GRACE_S after the limit (once the record is written, or
RECORD_WAIT_S later at most), if the same block is still armed, writes a line saying so on the
shared stderr and sends the worker STOP_SIGNAL. The worker registered faulthandler for it (`register(...,
all_threads=True, chain=True)`): its C handler, which needs no GIL, prints every thread's stack,
then re-raises the signal to its default action, which ends the process (status -STOP_SIGNAL).
The kernel delivers it to the main thread (it runs, and blocks no
signal), whose frames the handler thus reads frozen. Should the worker not be gone KILL_AFTER_S
later (a stderr that blocks the handler's write), SIGKILL ends it. (PID 1 of a container ignores
both, having no handler of its own for either: a worker that would be PID 1 runs as the child of
an init of its own, quanta.worker.cli.init, which exits as 128 + 10.) Only a watched block is
ever acted on: an idle worker, or one in its own bookkeeping (Redis calls, backoff sleeps, a
blocking XREADGROUP), has nothing armed. The deadlines are on the monotonic clock that every process of
the machine shares, so a recorder still starting when its worker took a task counts right. The
consumer that reclaims the task reads the count and tells a task that stalled workers
(MAX_STALLS) from one whose workers vanished (MAX_VANISHED).

The pipe between them carries nothing: the recorder waits on it to notice when the worker is
gone (it exited, was killed, or restarted in place: the pipe is not inherited across exec), and
ends then. It ignores SIGINT and SIGTERM: a stop is its worker's to make. A worker killed before
the record time (a crash, a node lost) leaves no record: the task had not stalled it. The worker
checks on the recorder with each heartbeat (`alive`) and restarts in place for a new one if it is
gone, so the second hand is never missing for long.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import logging
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time
from dataclasses import dataclass

import redis

from quanta.common import keys
from quanta.common.connect import sync_client
from quanta.common.settings import RedisSettings
from quanta.worker.config import STALL_GRACE_S

log = logging.getLogger("quanta.worker")

# After the stall limit, the recorder waits this long (SIGALRM's hand had it to stop a block that
# runs Python), then records (in a thread of its own), and ends the worker STALL_GRACE_S after the
# limit, once the record is written: it waits up to RECORD_WAIT_S more for a Redis slow to take it
# (the record, if still under way then, goes on after the end; the reclaim comes later still).
RECORD_AFTER_S = STALL_GRACE_S / 2
RECORD_WAIT_S = STALL_GRACE_S / 2
STOP_SIGNAL = signal.SIGUSR1  # the recorder's to send: the worker prints every thread's stack and ends
KILL_AFTER_S = 1.0  # a worker still there this long after STOP_SIGNAL is SIGKILLed

# The shared page: the sequence number, then the watched block (its limit on the monotonic clock, 0
# when none is watched; the stall limit; the task id's length), then the task id's bytes.
_SEQ = struct.Struct("=Q")
_BLOCK = struct.Struct("=ddH")
_LIMIT = struct.Struct("=d")
_ID_AT = _SEQ.size + _BLOCK.size
_SIZE = mmap.PAGESIZE
MAX_ID_BYTES = _SIZE - _ID_AT  # a longer task id is not recorded (its stall counts as a vanished worker's)


@dataclass(frozen=True, slots=True)
class Watched:
    seq: int
    limit: float  # when the block reaches the stall limit (monotonic clock); 0: none is watched
    seconds: float
    task: str


IDLE = Watched(0, 0.0, 0.0, "")  # what an unreadable page counts as (and is looked at again soon)


class StallRecorder:
    """The worker's end (see the module). Create it while the process has one thread; `stall_s` is
    the shortest limit the worker will arm (the recorder sleeps up to that long)."""

    def __init__(self, settings: RedisSettings, stall_s: float) -> None:
        self._area = mmap.mmap(-1, _SIZE, flags=mmap.MAP_SHARED)  # anonymous: shared with the fork only
        self._seq = 0
        worker = os.getpid()
        read, self._fd = os.pipe()  # not inherited across exec: a restart in place closes it
        gc.freeze()  # the collector in the child would touch (and so copy) every object's page
        self.pid = os.fork()
        if self.pid == 0:  # the recorder: never returns into the worker's code
            code = 1
            try:
                gc.disable()  # it makes no cycles worth collecting
                os.close(self._fd)
                code = serve(read, self._area, settings, worker, stall_s)
            except BaseException:
                log.exception("the stall recorder failed")
            finally:
                os._exit(code)
        os.close(read)
        self._gone = False
        # what STOP_SIGNAL does to the worker: every thread's stack on stderr, then the signal's
        # default action (the end), all in C: the main thread may hold the GIL for good
        faulthandler.register(STOP_SIGNAL, file=sys.stderr, all_threads=True, chain=True)

    def arm(self, task_id: str, seconds: float) -> None:
        """A watched block starts: it stalls the worker if it runs `seconds` (>= the recorder's `stall_s`)."""
        ident = task_id.encode()
        if len(ident) > MAX_ID_BYTES:
            ident = b""
        area, seq = self._area, self._seq
        _SEQ.pack_into(area, 0, seq + 1)  # odd: a write in progress
        _BLOCK.pack_into(area, _SEQ.size, time.monotonic() + seconds, seconds, len(ident))
        area[_ID_AT : _ID_AT + len(ident)] = ident
        _SEQ.pack_into(area, 0, seq + 2)
        self._seq = seq + 2

    def disarm(self) -> None:
        area, seq = self._area, self._seq
        _SEQ.pack_into(area, 0, seq + 1)
        _LIMIT.pack_into(area, _SEQ.size, 0.0)
        _SEQ.pack_into(area, 0, seq + 2)
        self._seq = seq + 2

    def alive(self) -> bool:
        """Whether the recorder still runs (reaps it if not). A system call: call it now and then."""
        if not self._gone:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                    return True
            self._gone = True
        return False

    def close(self) -> None:
        """End the recorder (its pipe) and reap it, so that no zombie outlives a restart in place."""
        with contextlib.suppress(OSError):
            os.close(self._fd)
        if not self._gone:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._gone = True


def watched(area: mmap.mmap) -> Watched | None:
    """The watched block, as the worker last wrote it (a read that overlapped a write is read again;
    None: a write stayed in progress for 10 ms, the worker stopped or killed in the middle of it)."""
    for _ in range(100):
        seq = _SEQ.unpack_from(area, 0)[0]
        if not seq & 1:
            limit, seconds, length = _BLOCK.unpack_from(area, _SEQ.size)
            ident = area[_ID_AT : _ID_AT + min(length, MAX_ID_BYTES)]
            if _SEQ.unpack_from(area, 0)[0] == seq:
                return Watched(seq, limit, seconds, ident.decode(errors="replace"))
        time.sleep(0.0001)  # the worker is between two of a few stores
    return None


def serve(fd: int, area: mmap.mmap, settings: RedisSettings, worker: int, stall_s: float) -> int:
    """The recorder's loop (see the module): sleep until a watched block could have stalled the
    worker, record the stall, end the worker; return when the worker is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    client = sync_client(settings)
    recorded = 0  # the sequence number of the block whose stall was recorded
    recording = threading.Thread()  # the record under way (a thread: Redis must not hold up the end)
    while True:
        now = time.monotonic()
        block = watched(area) or IDLE
        if block.limit and recorded != block.seq and now >= block.limit + RECORD_AFTER_S:
            time.sleep(0.001)  # and read again: a processor that reorders stores has shown them all by then
            if watched(area) == block:
                if block.task:
                    recording = threading.Thread(target=record, args=(client, block.task), daemon=True)
                    recording.start()
                recorded = block.seq
            continue
        if block.limit and recorded == block.seq and now >= block.limit + STALL_GRACE_S:
            if recording.is_alive():
                recording.join(max(0.0, block.limit + STALL_GRACE_S + RECORD_WAIT_S - now))
            if not select.select([fd], [], [], 0)[0]:  # the worker is still there (its pid is still its own)
                end(fd, worker, block)
            if recording.is_alive():
                recording.join()  # bounded by the client's timeouts
            return 0
        # a block armed from now on reaches its record time no sooner than this
        wake = now + (stall_s + RECORD_AFTER_S if block is not IDLE else 0.1)
        if block.limit:
            wake = min(wake, block.limit + (STALL_GRACE_S if recorded == block.seq else RECORD_AFTER_S))
        if select.select([fd], [], [], max(0.0, wake - now))[0] and not os.read(fd, 1):
            # the worker is gone; it may have been killed after the record time but before we woke
            block = watched(area) or IDLE
            late = time.monotonic() >= block.limit + RECORD_AFTER_S
            if block.limit and block.task and recorded != block.seq and late:
                record(client, block.task)
            if recording.is_alive():
                recording.join()
            return 0


def end(fd: int, worker: int, block: Watched) -> None:
    """End the worker stuck in `block`: STOP_SIGNAL (its stacks, then the end), else SIGKILL."""
    took = block.seconds + STALL_GRACE_S
    line = (
        f"Stalled: task {block.task} held the worker {took:g} s (the stall limit, {block.seconds:g} s,"
        f" + {STALL_GRACE_S:g} s) in code that never came back to Python; every thread's stack follows,"
        f" then the worker ends ({STOP_SIGNAL.name})\n"
    )
    with contextlib.suppress(OSError):
        os.write(2, line.encode())
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker, STOP_SIGNAL)
    if not select.select([fd], [], [], KILL_AFTER_S)[0]:
        log.error("the stalled worker did not end on %s: SIGKILL", STOP_SIGNAL.name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)


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
