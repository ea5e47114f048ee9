"""A FastAPI app of known cost, for tailtrace's thread-pool and pre-fork examples: each
endpoint is sync, so Starlette runs it in anyio's thread pool while the event loop, which
owns the socket, waits."""
import time

from fastapi import FastAPI

app = FastAPI()


def burn(ms: float) -> None:
    """ms of this thread's CPU time."""
    t = time.thread_time()
    while time.thread_time() - t < ms / 1000:
        pass


@app.get("/cpu")
def cpu():
    burn(8)
    return {"ok": 1}


@app.get("/sleep")
def sleep():
    time.sleep(0.005)
    return {"ok": 1}


@app.get("/empty")
def empty():
    return {"ok": 1}
