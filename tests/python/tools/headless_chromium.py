"""Drive headless Chromium over the DevTools protocol, with the standard library only.

The browser talks to us through ``--remote-debugging-pipe``: it reads commands from its
fd 3 and writes replies and events to its fd 4, each message JSON ending in a NUL byte.

    with HeadlessChromium() as browser:
        page = browser.open("file:///tmp/x.html", ready="window.done === true")
        assert not page.errors
        page.screenshot("/tmp/x.png")
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import suppress

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable on PATH, or None."""
    return next((p for p in map(shutil.which, NAMES) if p), None)


class HeadlessChromium:
    """A headless browser; as a context manager, killed and its profile removed on exit."""

    def __init__(self, executable=None, width=1280, height=2000, timeout=60.0):
        self.timeout, self.size = timeout, (width, height)
        self._proc = self._cmd_w = self._res_r = None
        self._next_id, self._buf = 0, bytearray()
        self._replies = {}  # id -> reply message
        self._events = []  # events no wait_event has consumed yet
        self._pages = {}  # sessionId -> Page, so error events reach their page
        self._profile = tempfile.mkdtemp(prefix="headless-chromium-")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives until close())
        try:
            self._start(executable or find_chromium())
        except BaseException:
            self.close()
            raise

    def _start(self, exe):
        if not exe:
            raise FileNotFoundError(f"no Chromium found (looked for {', '.join(NAMES)})")
        cmd_r, self._cmd_w = os.pipe()  # we write commands, the browser reads its fd 3
        self._res_r, res_w = os.pipe()  # the browser writes its fd 4, we read
        # Copy the child's ends to fds >= 10: os.pipe() may itself return 3 or 4, and then
        # dup2-ing one end onto 3 could clobber the other, or dup2(3, 3) would be a no-op
        # that leaves close-on-exec set. A real dup2 onto 3/4 clears close-on-exec.
        child_in = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(res_w, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (cmd_r, res_w):
            os.close(fd)

        def to_fds_3_and_4():  # runs in the child between fork and exec; dup2 takes no locks
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        w, h = self.size
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        args += ["--no-default-browser-check", f"--user-data-dir={self._profile}"]
        args += [f"--window-size={w},{h}", "--allow-file-access-from-files"]
        args += ["--remote-debugging-pipe", "about:blank"]
        # Crashpad keeps its database under $XDG_CONFIG_HOME; keep it out of ~/.config.
        # (--disable-crashpad-for-testing would avoid it, but breaks file:// navigation.)
        env = {**os.environ, "XDG_CONFIG_HOME": self._profile}
        try:
            # Not pass_fds=(3, 4): Popen marks those inheritable *before* preexec_fn and
            # fails with EBADF when the parent has no fd 3 or 4. close_fds=False is safe
            # since Python opens fds non-inheritable (PEP 446); only 0-4 reach Chromium.
            # A new session lets close() kill the zygote/renderer children as one group.
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                env=env,
                close_fds=False,
                preexec_fn=to_fds_3_and_4,  # noqa: PLW1509 (only dup2, see above)
                start_new_session=True,
            )
        finally:  # close the child's ends here, or we would never see EOF when it dies
            for fd in (child_in, child_out):
                os.close(fd)
        self.send("Browser.getVersion")  # returns once the browser listens

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stop the browser and all its processes; remove the profile directory."""
        if self._proc is not None:
            with suppress(OSError, RuntimeError, TimeoutError, subprocess.TimeoutExpired):
                if self._proc.poll() is None:
                    self.send("Browser.close", timeout=5)
                    self._proc.wait(5)
            with suppress(ProcessLookupError):  # children may outlive the main process;
                os.killpg(self._proc.pid, signal.SIGKILL)  # their group id is its pid
            self._proc.wait()
            self._proc = None
        for fd in (self._cmd_w, self._res_r):
            if fd is not None:
                os.close(fd)
        self._cmd_w = self._res_r = None
        self._stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _pump(self, deadline, what):
        """Read what the browser sends (up to 0.5 s); file replies by id, keep events."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out waiting for {what}")
        if not select.select([self._res_r], [], [], min(left, 0.5))[0]:
            if self._proc.poll() is not None:
                raise self._died(what)
            return
        chunk = os.read(self._res_r, 1 << 20)
        if not chunk:  # EOF: the browser is gone
            raise self._died(what)
        start = len(self._buf)
        self._buf += chunk
        while (end := self._buf.find(b"\0", start)) >= 0:
            msg = json.loads(self._buf[:end])
            del self._buf[: end + 1]
            start = 0
            if "id" in msg:
                self._replies[msg["id"]] = msg
                continue
            if msg.get("sessionId") in self._pages:
                self._pages[msg["sessionId"]]._on_event(msg["method"], msg["params"])
            self._events.append(msg)

    def _died(self, what):
        with suppress(subprocess.TimeoutExpired):
            self._proc.wait(5)
        self._stderr.seek(0)
        tail = self._stderr.read()[-3000:].decode(errors="replace")
        code = self._proc.poll()
        return RuntimeError(f"Chromium exited ({code}) while waiting for {what}; stderr:\n{tail}")

    def send(self, method, params=None, session=None, timeout=None):
        """Send one command (to a page's `session`, if given) and return its result."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._cmd_w, data) :]
        deadline = time.monotonic() + (timeout or self.timeout)
        while msg["id"] not in self._replies:
            self._pump(deadline, f"the reply to {method}")
        reply = self._replies.pop(msg["id"])
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply["result"]

    def wait_event(self, method, session=None, timeout=None):
        """Params of the first event `method` from `session`, already buffered or to come."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, msg in enumerate(self._events):
                if msg["method"] == method and msg.get("sessionId") == session:
                    return self._events.pop(i)["params"]
            self._events.clear()  # none of them was wanted; don't let them pile up
            self._pump(deadline, f"event {method}")

    def open(self, url: str, ready: str | None = None, timeout: float = 30.0) -> Page:
        """Load `url` in a new page; wait for its load event, then for `ready` to be truthy."""
        deadline = time.monotonic() + timeout
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        attach = {"targetId": target, "flatten": True}
        page = Page(self, self.send("Target.attachToTarget", attach)["sessionId"])
        for domain in ("Runtime", "Log", "Page"):
            page.send(f"{domain}.enable")
        # --window-size counts the emulated browser UI: the viewport came out 87 px short.
        metrics = dict(zip(("width", "height"), self.size), deviceScaleFactor=1, mobile=False)
        page.send("Emulation.setDeviceMetricsOverride", metrics)
        self._pages[page.session] = page  # errors count from here on
        self._events = [e for e in self._events if e.get("sessionId") != page.session]
        nav = page.send("Page.navigate", {"url": url}, timeout)
        if nav.get("errorText"):
            raise RuntimeError(f"navigating to {url} failed: {nav['errorText']}")
        self.wait_event("Page.loadEventFired", page.session, deadline - time.monotonic())
        last = "never truthy"
        while ready:
            try:
                if page.evaluate(ready):
                    break
            except RuntimeError as e:  # e.g. not defined yet: keep polling
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout}s for {ready!r} on {url}: {last}")
            time.sleep(0.05)
        return page


def _text(obj):  # a Runtime.RemoteObject, as console.* would print it
    return str(obj["value"]) if "value" in obj else obj.get("description", obj["type"])


class Page:
    """One attached page; `errors` collects exceptions, console errors and error logs."""

    def __init__(self, browser: HeadlessChromium, session: str):
        self.browser, self.session = browser, session
        self.errors: list[str] = []

    def send(self, method, params=None, timeout=None):
        return self.browser.send(method, params, self.session, timeout)

    def _on_event(self, method, params):
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            desc = d.get("exception", {}).get("description", "")
            self.errors.append(f"{d['text']} {desc} ({d.get('url', '?')}:{d['lineNumber'] + 1})")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(_text(arg) for arg in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            e = params["entry"]  # e.g. a failed resource load
            self.errors.append(f"{e['source']}: {e['text']} {e.get('url', '')}".strip())

    def evaluate(self, expression: str):
        """Value of `expression` (promises awaited); RuntimeError when it throws."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            desc = d.get("exception", {}).get("description", "")
            raise RuntimeError(f"{expression!r} threw: {d['text']} {desc}".strip())
        return result["result"].get("value")

    def screenshot(self, path) -> bytes:
        """PNG of the whole page (beyond the viewport too), written to `path` and returned."""
        params = {"format": "png", "captureBeyondViewport": True}
        png = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        with open(path, "wb") as f:
            f.write(png)
        return png


def nonblank_fraction(png: bytes, box: tuple[int, int, int, int] | None = None) -> float:
    """Fraction of pixels in `box` (left, top, right, bottom) unlike its most common colour."""
    from PIL import Image  # imported here so the browser part needs only the stdlib

    img = Image.open(io.BytesIO(png)).convert("RGBA")
    if box is not None:
        img = img.crop(box)
    total = img.width * img.height
    return 1.0 - max(n for n, _ in img.getcolors(total)) / total if total else 0.0
