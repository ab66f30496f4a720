#!/usr/bin/env python
"""Render every page of the built book in headless Chromium with the network off and check it.

The pages are served by a loopback http.server (127.0.0.1); Chromium resolves no host name, and every request to
anything but 127.0.0.1, file:, data: or blob: is failed and reported. Each page fails the check on:

- any console error: console.error/assert, an uncaught exception, or an error entry of the browser log (a 404, a
  blocked request, a script that could not load);
- a script included twice (Jupyter Book 1 adds every .js under _static to every page: see _config.yml);
- a console warning: console.warn, or a warning entry of the browser log, unless ALLOWED_WARNINGS names it and says
  why it is harmless (none does yet);
- math not typeset: a Sphinx math element with no MathJax output, a TeX error, a backslash shown as text (an
  undefined macro, or `\\_` inside `\\text{}`), a raw `$$`, or raw single-dollar math (`$g_x$` shown as text: a
  `$...$` pair whose content starts and ends with a non-blank character) in the page's text outside code;
- Markdown list markers inside a paragraph (a bulleted list that was glued or written into running text): a line of
  a <p> that starts with "- ", "* " or "+ ", or a colon or full stop followed by " - item ... - item";
- ipywidgets not rendered exactly once: one rendered view per widget-view tag, each with content;
- display math wider than its container at 1280 px or at 390 px (a phone), or inline math (which does not wrap) that
  ends past the content column;
- a table wider than the content column at 1280 px; at 390 px, a table wider than the column that is not inside a
  box that scrolls sideways (the page itself would slide). A table that fits at 1280 px may scroll inside its own box
  on a phone: the reader scrolls that table, not the page, and the theme wraps every table in such a box;
- an image in the page's content with no real alt text (missing or empty, or a file name or path, such as the
  image's own src), unless it is marked decorative (role="presentation" or aria-hidden="true");
- a figure with no caption (a <figure> without caption text, or an <img> outside any <figure>), or a captioned figure
  with no number (numfig numbers a figure only when it has a caption and a :name:);
- a page wider than the screen at 390 or 320 px (the whole page would slide sideways): an element that ends past the
  viewport outside any box that scrolls or clips;
- an accessibility violation: axe-core (vendored, data_scripts/vendor/axe-core) with the WCAG 2.0 and 2.1 rules of
  levels A and AA, at every width;
- a control the keyboard cannot reach or shows no focus (at 1280 px, WCAG 2.1.1 and 2.4.7): Tab is pressed through the
  page until the focus comes round again; every shown link, button, form field, <summary> and element with a
  non-negative tabindex must get the focus in turn, and each must draw a focus ring (an outline or a box shadow);
- an external request;
- on the pages of MENU_PAGES, a menu that does not work as a reader presses it: at 390 px the ☰ button must open the
  site navigation and the contents button the page's contents (links shown on top, in the viewport), and at 1280 px
  the ☰ button must collapse the navigation. Each press is made on a freshly loaded page.

"The page's content" is the theme's article (article.bd-article), else <main>, else <body>.

The browser is driven through the DevTools protocol over a pipe (--remote-debugging-pipe): no extra package.

    make book && python -m metacl_lite.tools browser-check [--html book/_build/html] [--chrome chromium]
"""
import argparse
import concurrent.futures
import contextlib
import functools
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
#: the widths every page is checked at (a laptop, two phones); math and tables are measured at the first two (at 320
#: px a display equation or a table may scroll in its own box: the page itself must not, at any width)
WIDTHS = (1280, 390, 320)
MEASURED = WIDTHS[:2]
#: the accessibility engine (vendored: data_scripts/vendor/axe-core/SOURCE.md) and the rules it runs: WCAG 2.0 and
#: 2.1, levels A and AA
AXE = ROOT / "data_scripts" / "vendor" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_JS = """
(async () => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: %s}, resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                 nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3), count: v.nodes.length}));
})()
"""
#: what makes the page wider than the screen (the whole page would slide sideways): the innermost shown elements that
#: end past the viewport, outside any box that scrolls or clips
PAGE_OVERFLOW_JS = """
(() => {
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth <= vw) return [];
  const clipped = el => { for (let p = el.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX; if (o !== 'visible') return true; } return false; };
  const past = [...document.body.querySelectorAll('*')].filter(el => {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.right > vw + 0.5 && r.width > 0 && s.visibility === 'visible' && s.position !== 'fixed' && !clipped(el);
  });
  const leaves = past.filter(el => !past.some(o => o !== el && el.contains(o)));  // the cause, not its containers
  if (!leaves.length) return [`the page scrolls sideways to ${document.documentElement.scrollWidth} px of ${vw}`];
  return leaves.sort((a, b) => b.getBoundingClientRect().right - a.getBoundingClientRect().right).slice(0, 3).map(
    el => `${el.tagName.toLowerCase()} ends at ${Math.round(el.getBoundingClientRect().right)} px of ${vw}: ` +
          (el.textContent || '').trim().slice(0, 60));
})()
"""


#: every control the keyboard must reach (shown, enabled, in the tab order), each marked with its place (data-kbd);
#: their descriptions. And the element that has the focus: its mark, and whether it draws a focus ring.
FOCUSABLE_JS = """
(() => {
  // shown: rendered, visible, not in a closed <details> (whose content Chromium lays out but skips)
  const shown = el => el.checkVisibility({visibilityProperty: true}) && el.getClientRects().length > 0;
  const els = [...document.querySelectorAll(
      'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]')].filter(
    el => el.tabIndex >= 0 && !el.disabled && !el.closest('[inert]') && shown(el));
  els.forEach((el, i) => el.setAttribute('data-kbd', i));
  return els.map(el => `${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') || el.textContent || el.title
                         || '').replace(/\\s+/g, ' ').trim().slice(0, 50)}"`);
})()
"""
FOCUSED_JS = """
(() => {
  const el = document.activeElement;
  if (!el || el === document.body || !el.hasAttribute('data-kbd')) return null;
  const s = getComputedStyle(el);
  return {i: +el.getAttribute('data-kbd'),
          ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'};
})()
"""


def check_keyboard(chrome: "Chrome", session: str) -> list[str]:
    """Press Tab through the page until the focus comes round to a control it had (or twice the controls' count):
    the controls never reached, and those reached that draw no focus ring."""
    names = chrome.evaluate(session, FOCUSABLE_JS)
    order: list[int] = []
    no_ring: list[str] = []
    for _ in range(2 * len(names) + 5):
        for kind in ("keyDown", "keyUp"):
            chrome.call("Input.dispatchKeyEvent", {"type": kind, "key": "Tab", "code": "Tab",
                                                   "windowsVirtualKeyCode": 9}, session)
        got = chrome.evaluate(session, FOCUSED_JS)
        if got is None:  # past the last control, on the page itself: the next press starts again
            continue
        if got["i"] in order:
            break
        order.append(got["i"])
        if not got["ring"]:
            no_ring.append(names[got["i"]])
    missed = [n for i, n in enumerate(names) if i not in order]
    problems = [f"not reachable with Tab: {len(missed)} of {len(names)} controls, e.g. {', '.join(missed[:3])}"]
    return (problems if missed else []) + (
        [f"no focus ring: {len(no_ring)} controls, e.g. {', '.join(no_ring[:4])}"] if no_ring else [])


@functools.lru_cache(maxsize=1)
def axe_source() -> str:
    """The vendored axe.min.js, after checking its SHA-256 against the one recorded beside it."""
    import hashlib

    data = AXE.read_bytes()
    want = (AXE.parent / "axe.min.js.sha256").read_text().split()[0]
    if hashlib.sha256(data).hexdigest() != want:
        raise SystemExit(f"error: {AXE} does not match its recorded SHA-256 ({want}); restore it from "
                         "data_scripts/vendor/axe-core/SOURCE.md")
    return data.decode()
# Console warnings that are not the book's to fix: (regular expression on the message, why it is allowed).
ALLOWED_WARNINGS: list[tuple[str, str]] = [
    (r"strict mode: use allowUnionTypes to allow union type keyword",
     "the vendored ipywidgets manager validates its own state schema with ajv, which warns about a union type in "
     "that schema; it is the manager's schema, not the book's, and the widgets render (checked above)"),
]
# Pages that must show widgets: chapter 3's interactive figure.
REQUIRED_WIDGET_VIEWS = {"chapters/03_dynamic_balance.html": 1}
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--remote-debugging-pipe"]

# The theme's menus, pressed on a few pages (the theme is the same on every page): (width, toggle) -> whether its links
# are shown before the press and after it. "primary": the ☰ button and the site navigation; "secondary": the page's
# contents button and its contents.
MENU_PAGES = ("intro.html", "chapters/03_dynamic_balance.html", "reproduce/pmnist-K50.html",
              "assignments/instructors.html")
MENU_EXPECT = {(390, "primary"): (False, True), (390, "secondary"): (False, True), (1280, "primary"): (True, False)}
MENU_JS = r"""
(async (which) => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const shown = sel => [...document.querySelectorAll(sel)].some(a => {
    const r = a.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0 || r.right <= 0 || r.left >= innerWidth || r.bottom <= 0 || r.top >= innerHeight)
      return false;
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return !!top && (top === a || a.contains(top) || top.contains(a));
  });
  const button = [...document.querySelectorAll(`.${which}-toggle`)].find(b => {
    const r = b.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(b).visibility !== 'hidden' && r.right > 0 && r.left < innerWidth;
  });
  const links = which === 'primary' ? 'nav.bd-links a' : 'nav.bd-toc-nav a, .page-toc a';
  const out = {before: shown(links), button: !!button, after: null};
  if (button) { button.click(); await sleep(800); out.after = shown(links); }
  return out;
})
"""

# Installed before any page script: the time of the last change to the DOM's structure or text.
WATCH_JS = """
window.__lastChange = performance.now();
new MutationObserver(() => { window.__lastChange = performance.now(); })
  .observe(document, {subtree: true, childList: true, characterData: true});
"""
SETTLED_JS = """
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  return document.readyState === 'complete' ? performance.now() - window.__lastChange : 0;
})()
"""
INSPECT_JS = r"""
(() => {
  const out = {};
  const maths = [...document.querySelectorAll('.math.notranslate')];
  out.math = maths.length;
  out.untypeset = maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.trim().slice(0, 80));
  out.math_errors = [];
  try {
    if (window.MathJax && MathJax.startup && MathJax.startup.document && MathJax.startup.toMML) {
      for (const item of MathJax.startup.document.math) {
        const mml = MathJax.startup.toMML(item.root);
        if (/<merror|<mtext[^>]*>[^<]*\\/.test(mml)) out.math_errors.push(item.math.slice(0, 80));
      }
    }
  } catch (e) { out.math_errors.push(`MathJax state unreadable: ${e}`); }
  const skip = 'pre, code, script, style, textarea, mjx-container, .math';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  out.raw_dollars = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.nodeValue;
    if (text.includes('$$') && !n.parentElement.closest(skip)) out.raw_dollars.push(text.trim().slice(0, 80));
  }
  // Raw single-dollar math and list markers in running text, per block of text (outside code and typeset math).
  const blocks = new Map();
  const walker2 = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker2.nextNode(); n; n = walker2.nextNode()) {
    if (n.parentElement.closest(skip + ', .highlight, kbd, samp')) continue;
    const block = n.parentElement.closest('p, li, td, th, dt, dd, figcaption, caption, h1, h2, h3, h4, h5, h6, div');
    if (block) blocks.set(block, (blocks.get(block) || '') + n.nodeValue);
  }
  out.raw_single_dollars = [];
  out.list_in_paragraph = [];
  const single = /(^|[^$\\])\$([^\s$](?:[^$\n]{0,200}?[^\s$])?)\$(?![$\d])/;
  for (const [block, text] of blocks) {
    const m = text.match(single);
    if (m) out.raw_single_dollars.push('$' + m[2].slice(0, 60) + '$');
    const lineStartsItem = /(^|\n)[ \t]*[-*+][ \t]+\S/, itemsRunTogether = /[:.][ \t\n]+-[ \t]+\S[^]*\s-[ \t]+\S/;
    if (block.tagName === 'P' && (lineStartsItem.test(text) || itemsRunTogether.test(text)))
      out.list_in_paragraph.push(text.trim().replace(/\s+/g, ' ').slice(0, 80));
  }
  // Images and figures in the page's content.
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  out.bad_alt = [];
  out.uncaptioned = [];
  out.unnumbered = [];
  for (const img of root.querySelectorAll('img')) {
    if (img.getAttribute('role') === 'presentation' || img.getAttribute('aria-hidden') === 'true') continue;
    const src = img.getAttribute('src') || '';
    const base = src.split('?')[0].split('/').pop();
    const alt = (img.getAttribute('alt') || '').trim();
    const fileLike = !/\s/.test(alt)
      && (/[\/\\]/.test(alt) || /\.(png|jpe?g|gif|svg|webp|avif|bmp|pdf)$/i.test(alt));
    if (!alt || alt === src || alt === base || fileLike) out.bad_alt.push(`${base}: alt=${JSON.stringify(alt)}`);
    // A widget's drawing (chapter 3) is a snapshot of a live output: it needs alt text, but no caption can reach
    // it; the page gives the same state as a numbered, captioned figure and says that it is a snapshot.
    if (!img.closest('figure') && !img.closest('.widget-subarea'))
      out.uncaptioned.push(`image ${base} outside a figure`);
  }
  for (const fig of root.querySelectorAll('figure')) {
    const cap = fig.querySelector('figcaption');
    const img = fig.querySelector('img');
    const name = fig.id || (img ? (img.getAttribute('src') || '').split('/').pop() : 'figure');
    let text = '';
    if (cap) {
      const c = cap.cloneNode(true);
      c.querySelectorAll('.caption-number, .headerlink').forEach(e => e.remove());
      text = c.textContent.trim();
    }
    if (!text) out.uncaptioned.push(`figure ${name} without a caption`);
    else if (!(cap.querySelector('.caption-number') || {textContent: ''}).textContent.trim())
      out.unnumbered.push(`figure ${name}: ${text.slice(0, 50)}`);
  }
  out.scripts = [...document.scripts].map(s => s.src).filter(Boolean);
  out.widget_views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  const areas = [...document.querySelectorAll('.widget-subarea')];
  out.widgets_rendered = areas.length;
  out.widgets_empty = areas.filter(a => !a.querySelector('.jupyter-widgets')).length;
  return out;
})()
"""
OVERFLOW_JS = """
(() => {
  const wide = [];
  try {
    if (!(window.MathJax && MathJax.startup && MathJax.startup.document)) return wide;
    const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
    const rr = root.getBoundingClientRect(), cs = getComputedStyle(root);
    const right = rr.right - parseFloat(cs.paddingRight);
    for (const item of MathJax.startup.document.math) {
      const c = item.typesetRoot;
      if (!c || !c.isConnected) continue;
      if (!item.display) {  // inline math does not wrap: it must end inside the column, or sit in a box that scrolls
        const r = c.getBoundingClientRect();
        if (!root.contains(c) || r.width === 0 || r.right <= right + 1) continue;
        let scrolls = false;
        for (let a = c.parentElement; a && a !== root; a = a.parentElement) {
          const ox = getComputedStyle(a).overflowX;
          if ((ox === 'auto' || ox === 'scroll') && a.getBoundingClientRect().right <= right + 1) { scrolls = true; break; }
        }
        if (!scrolls) wide.push(`inline, ends ${Math.round(r.right - right)}px past the column: ${item.math.trim().slice(0, 60)}`);
        continue;
      }
      const box = c.closest('.math') || c;
      const inner = c.querySelector('mjx-math');
      const need = Math.max(box.scrollWidth, c.scrollWidth, inner ? Math.ceil(inner.getBoundingClientRect().width) : 0);
      if (need > box.clientWidth + 1) wide.push(`${need}px in ${box.clientWidth}px: ${item.math.trim().slice(0, 60)}`);
    }
  } catch (e) { wide.push(`MathJax state unreadable: ${e}`); }
  return wide;
})()
"""
# Every table of the page's content wider than the content column: its width, the column's, whether it sits in a box
# that scrolls sideways (no wider than the column), and its first cell's text.
TABLES_JS = """
(() => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const cs = getComputedStyle(root);
  const column = root.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const wide = [];
  for (const t of root.querySelectorAll('table')) {
    if (t.closest('.highlight, pre, mjx-container') || !t.getClientRects().length) continue;
    const width = Math.ceil(Math.max(t.scrollWidth, t.getBoundingClientRect().width));
    if (width <= column + 1) continue;
    let scrolls = false;
    for (let a = t.parentElement; a && a !== root; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if ((ox === 'auto' || ox === 'scroll') && a.clientWidth <= column + 1) { scrolls = true; break; }
    }
    const cell = t.querySelector('caption, th, td');
    wide.push({width, column: Math.round(column), scrolls,
               head: (cell ? cell.textContent : '').trim().replace(/\\s+/g, ' ').slice(0, 40)});
  }
  return wide;
})()
"""


def is_local(url: str) -> bool:
    """A request the offline book may make: its own files (loopback server or file:) or inline data."""
    parts = urlsplit(url)
    if parts.scheme in ("file", "data", "blob", "about"):
        return True
    return parts.scheme in ("http", "https", "ws") and parts.hostname in ("127.0.0.1", "localhost", "::1")


class Chrome:
    """Headless Chromium driven by the DevTools protocol over --remote-debugging-pipe (NUL-separated JSON)."""

    def __init__(self, chrome: str, profile: str):
        to_chrome, self._out = os.pipe()
        self._in, from_chrome = os.pipe()

        def map_fds():  # Chromium reads commands on fd 3 and writes replies and events on fd 4
            a, b = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([chrome, *CHROME_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     preexec_fn=map_fds, pass_fds=(3, 4), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buf = b""
        self._ids = iter(range(1, 1 << 62))
        self.events: list[dict] = []

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        return msg_id

    def _receive(self, deadline: float) -> dict | None:
        while b"\0" not in self._buf:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([self._in], [], [], wait)[0]:
                return None
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, msg: dict) -> None:
        if msg.get("method") == "Fetch.requestPaused":  # answer at once, or the request hangs
            p = msg["params"]
            if is_local(p["request"]["url"]):
                self._send("Fetch.continueRequest", {"requestId": p["requestId"]}, msg.get("sessionId"))
            else:
                self._send("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "BlockedByClient"},
                           msg.get("sessionId"))
        self.events.append(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60):
        msg_id = self._send(method, params, session)
        deadline = time.monotonic() + timeout
        while (msg := self._receive(deadline)) is not None:
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self._event(msg)
        raise TimeoutError(f"{method}: no reply in {timeout:.0f} s")

    def pump(self, seconds: float) -> None:
        """Handle events for `seconds`."""
        deadline = time.monotonic() + seconds
        while (msg := self._receive(deadline)) is not None:
            if "method" in msg:
                self._event(msg)

    def evaluate(self, session: str, expression: str, timeout: float = 60):
        r = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                      session, timeout)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


@dataclass
class PageReport:
    page: str
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    duplicate_scripts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # render failures: math, widgets, overflow, loading
    math: int = 0  # Sphinx math elements on the page
    widgets: int = 0  # rendered widget views

    @property
    def ok(self) -> bool:
        return not (self.console_errors or self.console_warnings or self.external or self.duplicate_scripts
                    or self.problems)


def _console_errors(events: list[dict]) -> list[str]:
    errors = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errors.append("console." + p["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            errors.append("uncaught: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"log ({p['entry']['source']}): {p['entry']['text']} {p['entry'].get('url', '')}".strip())
    return [s[:300] for s in errors]


def _console_warnings(events: list[dict], allowed=ALLOWED_WARNINGS) -> list[str]:
    """console.warn calls and warning entries of the browser log, but those ALLOWED_WARNINGS names."""
    warnings = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p["type"] == "warning":
            warnings.append("console.warn: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "warning":
            warnings.append(f"log ({p['entry']['source']}): {p['entry']['text']} {p['entry'].get('url', '')}".strip())
    return [w[:300] for w in warnings if not any(re.search(pattern, w) for pattern, _why in allowed)]


def _set_width(chrome: Chrome, session: str, width: int) -> None:
    chrome.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                       "mobile": width < 600}, session)


@contextlib.contextmanager
def _tab(chrome: Chrome, url: str, width: int):
    """A new tab `width` px wide that watches the DOM (WATCH_JS), answers every request (only local ones are let
    through), has the focus of a front tab, and has started loading `url`; its session. Closed on exit."""
    target = chrome.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = chrome.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            chrome.call(f"{domain}.enable", session=session)
        chrome.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
        chrome.call("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_JS}, session)
        chrome.call("Emulation.setFocusEmulationEnabled", {"enabled": True}, session)
        _set_width(chrome, session, width)
        chrome.call("Page.navigate", {"url": url}, session)
        yield session
    finally:
        chrome.call("Target.closeTarget", {"targetId": target})


def _settle(chrome: Chrome, session: str, settle_ms: float, max_wait: float) -> bool:
    """Wait until the page has loaded, MathJax is done and the DOM has not changed for `settle_ms`; False if that
    took longer than `max_wait` seconds."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline and not any(
            e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session for e in chrome.events):
        chrome.pump(0.1)
    while time.monotonic() < deadline:
        chrome.pump(0.25)
        if (chrome.evaluate(session, SETTLED_JS, timeout=max_wait) or 0) >= settle_ms:
            return True
    return False


def check_menus(chrome: Chrome, url: str, settle_ms: float = 1000, max_wait: float = 60) -> list[str]:
    """Press each menu toggle of MENU_EXPECT on a freshly loaded page at its width; the problems found."""
    problems = []
    for (width, which), want in MENU_EXPECT.items():
        with _tab(chrome, url, width) as session:
            _settle(chrome, session, settle_ms, max_wait)
            got = chrome.evaluate(session, f"({MENU_JS})('{which}')")
        what = "site navigation (☰)" if which == "primary" else "page contents"
        if not got["button"]:
            problems.append(f"menu at {width} px: no {what} button to press")
        elif (got["before"], got["after"]) != want:
            def state(s):
                return "shown" if s else "hidden"
            problems.append(f"menu at {width} px: the {what} was {state(got['before'])}, and {state(got['after'])} "
                            f"after pressing its button; it should be {state(want[0])}, then {state(want[1])}")
    return problems


def _measure(chrome: Chrome, session: str, max_wait: float) -> dict:
    """At each of WIDTHS: the page's overflow and axe's violations, and at the MEASURED widths the math that
    overflows and the tables; then the keyboard check back at the first width."""
    m: dict = {"overflow": {}, "tables": {}, "page": {}, "axe": {}}
    chrome.evaluate(session, axe_source() + ";0")
    for width in WIDTHS:
        if width != WIDTHS[0]:
            _set_width(chrome, session, width)
            chrome.pump(0.5)
        if width in MEASURED:
            m["overflow"][width] = chrome.evaluate(session, OVERFLOW_JS)
            m["tables"][width] = chrome.evaluate(session, TABLES_JS)
        m["page"][width] = chrome.evaluate(session, PAGE_OVERFLOW_JS)
        m["axe"][width] = chrome.evaluate(session, AXE_JS % json.dumps(AXE_TAGS), timeout=max_wait)
    _set_width(chrome, session, WIDTHS[0])
    chrome.pump(0.5)
    m["keyboard"] = check_keyboard(chrome, session)
    chrome.pump(0.25)
    return m


def _problems(rel: str, info: dict, m: dict) -> list[str]:
    """The render problems of page `rel`, from what INSPECT_JS found (`info`) and what _measure measured (`m`)."""
    p = [f"math not typeset: {x}" for x in info["untypeset"]]
    p += [f"math error: {x}" for x in info["math_errors"]]
    p += [f"raw $$ in text: {t}" for t in info["raw_dollars"]]
    p += [f"raw $ math in text: {t}" for t in info["raw_single_dollars"]]
    p += [f"list markers inside a paragraph: {t}" for t in info["list_in_paragraph"]]
    p += [f"image without real alt text: {t}" for t in info["bad_alt"]]
    p += [f"no caption: {t}" for t in info["uncaptioned"]]
    p += [f"captioned figure without a number: {t}" for t in info["unnumbered"]]
    if info["widgets_rendered"] != info["widget_views"] or info["widgets_empty"]:
        p.append(f"widgets: {info['widget_views']} views, {info['widgets_rendered']} rendered, "
                 f"{info['widgets_empty']} empty")
    if info["widget_views"] < REQUIRED_WIDGET_VIEWS.get(rel, 0):
        p.append(f"widgets: {info['widget_views']} views, expected at least {REQUIRED_WIDGET_VIEWS[rel]}")
    p += [f"math overflows at {w} px: {o}" for w, items in m["overflow"].items() for o in items]
    for t in m["tables"][WIDTHS[0]]:
        p.append(f"table wider than the column at {WIDTHS[0]} px: {t['width']} px in {t['column']} px ({t['head']})")
    for w in MEASURED[1:]:
        p += [f"table wider than the column at {w} px and not in a box that scrolls: {t['width']} px in "
              f"{t['column']} px ({t['head']})" for t in m["tables"][w] if not t["scrolls"]]
    p += [f"page wider than the screen at {w} px: {o}" for w, items in m["page"].items() for o in items]
    for w, violations in m["axe"].items():
        p += [f"axe at {w} px: {v['id']} ({v['impact']}, {v['count']} elements, e.g. {', '.join(v['nodes'])}): "
              f"{v['help']}" for v in violations]
    return p + [f"keyboard at {WIDTHS[0]} px: {k}" for k in m["keyboard"]]


def check_page(chrome: Chrome, url: str, rel: str, settle_ms: float = 1000, max_wait: float = 60) -> PageReport:
    """Open `url` in a new tab at 1280 px, wait until it is loaded, MathJax is done and the DOM has not changed for
    `settle_ms`, inspect it, then measure it again at the narrower WIDTHS; the menus on a page of MENU_PAGES."""
    report = PageReport(rel)
    chrome.events = []
    with _tab(chrome, url, WIDTHS[0]) as session:
        if not _settle(chrome, session, settle_ms, max_wait):
            report.problems.append(f"page still changing after {max_wait:.0f} s")
        info = chrome.evaluate(session, INSPECT_JS)
        measured = _measure(chrome, session, max_wait)
    events = [e for e in chrome.events if e.get("sessionId") == session]
    report.console_errors = _console_errors(events)
    report.console_warnings = _console_warnings(events)
    requests = [e["params"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    report.external = sorted({r["request"]["url"] for r in requests if not is_local(r["request"]["url"])})
    report.duplicate_scripts = sorted({u for u in info["scripts"] if info["scripts"].count(u) > 1})
    report.problems += _problems(rel, info, measured)
    if rel in MENU_PAGES:
        report.problems += check_menus(chrome, url, settle_ms, max_wait)
    report.math = info["math"]
    report.widgets = info["widgets_rendered"]
    return report


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass



def pages(html: Path) -> list[str]:
    skip = ("_static", "_sources", "_images", "_downloads")
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if p.relative_to(html).parts[0] not in skip)


def check_book(html: Path, chrome_path: str, only: list[str] | None = None, browsers: int = 3) -> list[PageReport]:
    """Check every page (or the pages in `only`, relative to `html`), in page order, spread over `browsers`
    Chromium instances that run side by side (a page's check is mostly waiting for it to settle; each browser checks
    its pages one at a time, each page in its own tab, so the reports do not depend on how they are spread)."""
    rels = list(only or pages(html))
    n = max(1, min(browsers, len(rels)))
    with contextlib.ExitStack() as stack:
        profiles = [stack.enter_context(tempfile.TemporaryDirectory(ignore_cleanup_errors=True)) for _ in range(n)]
        chromes = []
        try:
            for profile in profiles:  # all started before any thread: Popen's preexec_fn is not safe beside threads
                chromes.append(Chrome(chrome_path, profile))
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     functools.partial(_QuietHandler, directory=str(html)))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                base = f"http://127.0.0.1:{server.server_address[1]}/"
                shares = [rels[i::n] for i in range(n)]
                with concurrent.futures.ThreadPoolExecutor(n) as pool:
                    done = pool.map(lambda c, share: [check_page(c, base + rel, rel) for rel in share], chromes, shares)
                    by_page = {r.page: r for reports in done for r in reports}
                return [by_page[rel] for rel in rels]
            finally:
                server.shutdown()
                server.server_close()
        finally:
            for chrome in chromes:
                chrome.close()


def find_chrome() -> str:
    return (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
            or "chromium")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html", type=Path, default=ROOT / "book" / "_build" / "html")
    p.add_argument("--chrome", default=find_chrome())
    p.add_argument("--page", action="append", help="check only this page (relative to --html); repeatable")
    p.add_argument("--json", type=Path, help="also write the per-page reports here")
    p.add_argument("--browsers", type=int, default=3, help="Chromium instances checking pages side by side (default 3)")
    a = p.parse_args(argv)
    chrome = shutil.which(a.chrome)  # a name on PATH, or a path to an executable file
    if chrome is None:
        print(f"error: --chrome {a.chrome}: no such executable" + (" on PATH" if "/" not in a.chrome else "")
              + "; install Chromium (e.g. apt-get install chromium) or give its path with --chrome PATH",
              file=sys.stderr)
        return 2
    if a.browsers < 1:
        print(f"--browsers {a.browsers}: give 1 or more", file=sys.stderr)
        return 2
    if not (a.html / "index.html").exists():
        print(f"no built book in {a.html}; run `make book` first", file=sys.stderr)
        return 2
    reports = check_book(a.html, chrome, a.page, a.browsers)
    for r in reports:
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.page}: {len(r.console_errors)} console errors, "
              f"{len(r.console_warnings)} console warnings, "
              f"{r.math} math, {r.widgets} widgets, {len(r.external)} external, "
              f"{len(r.duplicate_scripts)} scripts loaded twice")
        for line in r.console_errors + r.console_warnings + r.external + r.duplicate_scripts + r.problems:
            print("     ", line.splitlines()[0])
    if a.json:
        a.json.write_text(json.dumps([{**vars(r)} for r in reports], indent=1))
    bad = [r.page for r in reports if not r.ok]
    print(f"{len(reports)} pages, {len(bad)} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the browsers end with this process (their pipes close); no traceback
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
