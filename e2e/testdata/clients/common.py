"""Shared by the Python scripts of the client conformance suite: each step's
outcome is printed as a JSON line under its name, so the Go
driver can compare a run against sluice with the same run on a local file."""
import datetime
import json
import re

_PREFIX = re.compile(r"^(?:SQLITE_[A-Z0-9_]+: |SQLite error: |\([a-zA-Z_.]+\) )")
# libsql-experimental's wrapping of an error a server answered (any Hrana
# server): Hrana: `stream error: `Error { message: "...", code: "..." }``
_REMOTE = re.compile(r'^Hrana: `stream error: `Error \{ message: "(.*)", code: "[A-Z0-9_]*" \}``$', re.S)


def error_text(e):
    """SQLite's message without the client's code prefixes, which differ
    between a local file and any server."""
    m = str(getattr(e, "orig", None) or e).split("\n[SQL:")[0]
    remote = _REMOTE.match(m)
    if remote:
        m = remote.group(1).replace('\\"', '"').replace("\\\\", "\\")
    while True:
        n = _PREFIX.sub("", m)
        if n == m:
            return m
        m = n


def plain(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"blob": bytes(v).hex()}
    if isinstance(v, (datetime.datetime, datetime.date)):
        return {"date": v.isoformat()}
    if isinstance(v, float) and v != v:
        return {"number": "NaN"}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


STEP_TIMEOUT = 15


class Recorder:
    """Prints each step's outcome as a JSON line as soon as it is known, so the
    driver sees every finished step even if the script is killed."""

    hung = None  # after a step hangs, the connection is suspect: later steps are not run

    def _emit(self, name, line):
        line = dict(step=name, **line)
        print(json.dumps(line), flush=True)

    def step(self, name, fn):
        try:
            self._emit(name, {"ok": plain(fn())})
        except Exception as e:  # the outcome is the error the application sees
            self._emit(name, {"error": error_text(e)})

    async def astep(self, name, coro_fn):
        import asyncio
        if self.hung:
            self._emit(name, {"error": "not run: step %s hung" % json.dumps(self.hung)})
            return
        try:
            self._emit(name, {"ok": plain(await asyncio.wait_for(coro_fn(), STEP_TIMEOUT))})
        except asyncio.TimeoutError:
            self.hung = name
            self._emit(name, {"error": "step timed out after %ds" % STEP_TIMEOUT})
        except Exception as e:
            self._emit(name, {"error": error_text(e)})
