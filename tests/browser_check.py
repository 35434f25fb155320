"""Open an HTML page in a real browser (Debian's headless Chromium) and say what a reader
would see: which images decoded, whether anything is wider than the window, what the page
threw, and a screenshot of it.

A probe script goes into a copy of the page (the first script at the top of <head>, so it
sees errors of the page's own scripts); once the page has loaded and its scripts have run
(Chromium's virtual time lets timers and image decoding finish), the probe writes its
findings into the DOM, which `--dump-dom` prints. A second Chromium takes the screenshot at
the page's full height."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

WIDTH = 1280
MAX_HEIGHT = 16000
PROBE_ID = "tcpeval-browser-probe"
# Chromium's own settings for a container: no user namespaces for its sandbox (we run as
# root), no GPU, no first-run or crash-reporter work, and its shared memory in /tmp
# (podman gives a container 64 MB of /dev/shm; a full-page screenshot of the design report
# is 1280 x 14,000 pixels, 70 MB)
FLAGS = ["--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-crash-reporter",
         "--disable-dev-shm-usage"]

PROBE = """<script>
(() => {
  const errors = [];
  window.addEventListener("error", e => errors.push(String(e.message || e.type)), true);
  window.addEventListener("unhandledrejection", e => errors.push("rejection: " + String(e.reason)));
  // images the page carries as data URIs inside its scripts (Snakemake's report keeps its
  // results so, and shows them on a click): decoded here as the browser would
  const embedded = () => {
    const uris = new Set();
    for (const s of document.scripts) {
      for (const m of s.text.matchAll(/data:image\\/(?:png|jpeg|svg\\+xml)(?:;[^;,"'\\s]*)*;base64,[A-Za-z0-9+\\/=]+/g)) uris.add(m[0]);
    }
    return [...uris];
  };
  const decode = uri => new Promise(ok => {
    const img = new Image();
    img.onload = () => ok({ok: img.naturalWidth > 0, width: img.naturalWidth});
    img.onerror = () => ok({ok: false, width: 0});
    img.src = uri;
  });
  window.addEventListener("load", () => setTimeout(async () => {
    const width = document.documentElement.clientWidth;
    const images = [...document.images].map(i => ({
      src: i.currentSrc.slice(0, 40), alt: i.alt, ok: i.complete && i.naturalWidth > 0,
      width: i.naturalWidth, shown_width: Math.round(i.getBoundingClientRect().width)}));
    const wide = [...document.body.querySelectorAll("*")]
      .filter(e => e.getBoundingClientRect().right > width + 1)
      .map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
                " right " + Math.round(e.getBoundingClientRect().right));
    const inScripts = await Promise.all(embedded().map(decode));
    const out = document.createElement("pre");
    out.id = "%(id)s";
    out.hidden = true;
    out.textContent = JSON.stringify({
      title: document.title, text: document.body.innerText.slice(0, 20000), images, embedded: inScripts,
      errors, window_width: width, scroll_width: document.documentElement.scrollWidth,
      height: document.documentElement.scrollHeight, wide: wide.slice(0, 20)});
    document.body.appendChild(out);
  }, 500));
})();
</script>""" % {"id": PROBE_ID}


def require_chromium() -> None:
    """Fail, not skip, without Chromium: tools/apt-packages.txt installs it, and a skipped
    test would hide a machine that lacks it (tests/deps checks the list)."""
    if shutil.which("chromium-headless-shell") is None:
        pytest.fail("chromium-headless-shell is not installed (tools/apt-packages.txt)")


def _with_probe(page: Path, dest: Path) -> Path:
    text = page.read_text(errors="replace")
    head = re.search(r"<head[^>]*>", text, re.I)
    at = head.end() if head else 0
    dest.write_text(text[:at] + PROBE + text[at:])
    return dest


def _chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["chromium-headless-shell", *FLAGS, *args], capture_output=True, text=True,
                          timeout=timeout)


def open_page(page: Path, screenshot: Path, *, budget_ms: int = 10000) -> dict:
    """What Chromium made of ``page`` (see PROBE for the fields), its screenshot written to
    ``screenshot`` (a PNG of the whole page, WIDTH wide, at most MAX_HEIGHT high) and copied
    to $TCPEVAL_TEST_ARTIFACTS when that is set."""
    require_chromium()
    probed = _with_probe(page, page.with_name(page.stem + ".probed.html"))
    try:
        url = probed.resolve().as_uri()
        dom = _chromium(f"--window-size={WIDTH},900", f"--virtual-time-budget={budget_ms}", "--dump-dom", url)
        found = re.search(rf'<pre id="{PROBE_ID}"[^>]*>(.*?)</pre>', dom.stdout, re.S)
        if not found:
            raise AssertionError(f"the probe did not report (exit {dom.returncode}): {dom.stderr[-2000:]}")
        seen = json.loads(html.unescape(found.group(1)))
        height = min(MAX_HEIGHT, max(600, int(seen["height"])))
        shot = _chromium(f"--window-size={WIDTH},{height}", f"--virtual-time-budget={budget_ms}",
                         f"--screenshot={screenshot}", url)
        if shot.returncode != 0 or not screenshot.exists():
            raise AssertionError(f"no screenshot (exit {shot.returncode}): {shot.stderr[-2000:]}")
        if os.environ.get("TCPEVAL_TEST_ARTIFACTS"):
            artifacts = Path(os.environ["TCPEVAL_TEST_ARTIFACTS"])
            artifacts.mkdir(parents=True, exist_ok=True)
            shutil.copy2(screenshot, artifacts / screenshot.name)
        return seen
    finally:
        probed.unlink(missing_ok=True)


def problems(seen: dict) -> list[str]:
    """What a reader would call broken: an image that did not decode, an element wider than
    the window (the page scrolls sideways), an error thrown."""
    out = [f"image {i['alt'] or i['src']!r} did not load" for i in seen["images"] if not i["ok"]]
    out += [f"embedded image {n} did not decode" for n, i in enumerate(seen["embedded"]) if not i["ok"]]
    if seen["scroll_width"] > seen["window_width"]:
        out.append(f"the page is {seen['scroll_width']} px wide in a {seen['window_width']} px window: "
                   + "; ".join(seen["wide"]))
    out += [f"script error: {e}" for e in seen["errors"]]
    return out
