"""A headless Chromium: a page's DOM, console lines and a screenshot from one run of it
(:func:`browse`); or one driven over its DevTools protocol (:class:`Browser`, with
tornado's websocket client, which distributed brings): open a page, evaluate JavaScript in
it, take screenshots, and collect what its console and uncaught exceptions report as
errors."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browse(page, tmp_path):
    """Open ``page`` in headless Chromium: its DOM, its console lines, a screenshot."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed here (.ci/run installs Debian's chromium "
                    "where apt can); the report was written but not opened in a browser")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120)
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=120)
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    return dom.stdout, console, shot


class Browser:
    """A headless Chromium with one tab, in a profile under ``directory``; closed with
    :meth:`close` (or as a context manager)."""

    def __init__(self, directory: Path, timeout: float = 60.0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "DevToolsActivePort").unlink(missing_ok=True)  # an earlier one's
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--remote-debugging-port=0", "--window-size=1400,1100",
             f"--user-data-dir={directory}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = devtools_port(directory / "DevToolsActivePort", self.proc, timeout)
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        targets = json.load(direct.open(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page = next(t for t in targets if t["type"] == "page")
        self.errors: list[str] = []
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ws = self.run(self._connect(page["webSocketDebuggerUrl"]))
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def run(self, coro, timeout: float = 60.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _connect(self, url: str):
        from tornado.websocket import websocket_connect

        ws = await websocket_connect(url, max_message_size=256 * 2**20)
        asyncio.ensure_future(self._read(ws))
        return ws

    async def _read(self, ws) -> None:
        while True:
            text = await ws.read_message()
            if text is None:
                return
            msg = json.loads(text)
            if "id" in msg and msg["id"] in self.waiting:
                self.waiting.pop(msg["id"]).set_result(msg)
            else:
                self._note(msg)

    def _note(self, msg: dict) -> None:
        """Keep what the page reports as an error."""
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description")
                               or details.get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))

    async def _call(self, method: str, params: dict) -> dict:
        msg_id = next(self.ids)
        future = self.loop.create_future()
        self.waiting[msg_id] = future
        await self.ws.write_message(json.dumps({"id": msg_id, "method": method,
                                                "params": params}))
        return await future

    def call(self, method: str, **params) -> dict:
        """Send one DevTools command; its result (AssertionError on an error)."""
        reply = self.run(self._call(method, params))
        assert "error" not in reply, reply
        return reply["result"]

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str):
        """The JSON value of ``expression`` in the page (None when it throws)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            return None
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, every: float = 0.1):
        """The first truthy value of ``expression``; AssertionError after ``timeout``."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(every)
        raise AssertionError(f"{expression} stayed false for {timeout:g} s; errors: "
                             f"{self.errors}")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.run(self._close(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.proc.kill()
            self.proc.wait()

    async def _close(self) -> None:
        self.ws.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def devtools_port(path: Path, proc: subprocess.Popen, timeout: float) -> int:
    """The DevTools port Chromium writes into its profile as it starts."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists():
            text = path.read_text().split()
            if text:
                return int(text[0])
        if proc.poll() is not None:
            raise AssertionError(f"chromium exited ({proc.returncode}) before listening")
        time.sleep(0.05)
    raise AssertionError(f"chromium wrote no DevTools port within {timeout:g} s")
