"""OTLP batches sent from a thread of their own, for a producer that must never wait on the
network (the flight recorder's capture follower, pipeline.follow_captures).

SpanQueue(endpoint)  -> put(message, spans) never blocks: when the queue holds max_batches,
                        the oldest batch is dropped (counted) to make room. A sender thread
                        posts each batch (render/otlp.py post_once); an endpoint that is down
                        or busy is tried again after each of retry_s (backoff), then the
                        batch is dropped (counted) and the next one tried.
SpanQueue.close(s)   -> sends what it can within s seconds, drops (counts) the rest; the
                        counts.
SpanQueue.counts()   -> sent_batches, sent_spans, dropped_batches, dropped_spans, retries,
                        queued_batches, last_error: what docs/export.md calls the live
                        export's counts.
"""
from __future__ import annotations

import collections
import threading

from .otlp import post_once, refusal

QUEUE_BATCHES = 256                   # ~256,000 spans at otlp.BATCH_SPANS a batch
LIVE_RETRY_S = (0.5, 1.0, 2.0, 4.0, 8.0)
STOPPED = "not sent before the exporter stopped"


class SpanQueue:
    def __init__(self, endpoint: str, max_batches: int = QUEUE_BATCHES,
                 retry_s=LIVE_RETRY_S, timeout_s: float = 5.0):
        self.endpoint, self.max_batches = endpoint, max_batches
        self.retry_s, self.timeout_s = tuple(retry_s), timeout_s
        self._q: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._stop = threading.Event()       # close(): give up waiting between retries
        self._closing = False
        self._c = dict(sent_batches=0, sent_spans=0, dropped_batches=0, dropped_spans=0,
                       retries=0, last_error="")
        self._thread = threading.Thread(target=self._run, name="otlp-send", daemon=True)
        self._thread.start()

    def put(self, message, spans: int) -> None:
        """Queue one ExportTraceServiceRequest of `spans` spans; never blocks."""
        body = message.SerializeToString()
        with self._cv:
            if len(self._q) >= self.max_batches:
                _, n = self._q.popleft()
                self._drop(n, f"the queue of {self.max_batches} batches was full")
            self._q.append((body, spans))
            self._cv.notify()

    def counts(self) -> dict:
        with self._cv:
            return dict(self._c, queued_batches=len(self._q))

    def close(self, timeout_s: float = 10.0) -> dict:
        """Send what is queued for up to timeout_s, then drop (count) what is left."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._thread.join(timeout_s)
        self._stop.set()                     # a retry's wait ends now, its batch is dropped
        self._thread.join()
        with self._cv:
            while self._q:
                _, n = self._q.popleft()
                self._drop(n, STOPPED)
        return self.counts()

    def _drop(self, spans: int, why: str) -> None:
        """Count a batch dropped; why becomes last_error, except that a drop at the stop
        leaves the endpoint's own refusal there (what to fix)."""
        self._c["dropped_batches"] += 1
        self._c["dropped_spans"] += spans
        if why != STOPPED or not self._c["last_error"]:
            self._c["last_error"] = why

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._q and not self._closing:
                    self._cv.wait()
                if not self._q:
                    return
                body, spans = self._q.popleft()
            sent, why = self._send(body)
            with self._cv:
                if sent:
                    self._c["sent_batches"] += 1
                    self._c["sent_spans"] += spans
                else:
                    self._drop(spans, why)

    def _send(self, body: bytes) -> tuple[bool, str]:
        """One batch with its retries: (sent, why not)."""
        why = ""
        for i in range(len(self.retry_s) + 1):
            if self._stop.is_set():
                return False, why or STOPPED
            sent, again, why = post_once(self.endpoint, body, self.timeout_s)
            if sent:
                return True, ""
            why = refusal(self.endpoint, why, "start a collector there or give --otlp URL")
            if not again or i == len(self.retry_s):
                break
            with self._cv:
                self._c["retries"] += 1
            if self._stop.wait(self.retry_s[i]):
                break
        return False, why

