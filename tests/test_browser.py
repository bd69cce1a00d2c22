"""The built site in a real browser (headless Chromium): every page loads with no raw
markdown table (a table the renderer left as `| ... |` text), no broken image, and nothing
wider than a 1280-pixel window (wide tables scroll inside their own box)."""

import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 1280

# the harness loads each page in a same-origin iframe of the window's width and writes what
# it found into the document, which Chromium's --dump-dom prints
HARNESS = """<!doctype html><html><body>
<iframe id="f" style="width: %(width)dpx; height: 900px; border: 0"></iframe>
<pre id="out">running</pre>
<script>
const pages = %(pages)s;
const found = {};
const frame = document.getElementById("f");
function check(doc, win) {
  const problems = [];
  for (const p of doc.querySelectorAll("article p, article li")) {
    if (/\\|\\s*:?-{3,}/.test(p.textContent)) {
      problems.push("raw table: " + p.textContent.slice(0, 80));
    }
  }
  for (const img of doc.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) problems.push("broken image: " + img.src);
  }
  const wide = doc.documentElement.scrollWidth;
  if (wide > win.innerWidth + 1) problems.push("page " + wide + " px wide");
  return problems;
}
function next(i) {
  if (i === pages.length) {
    document.getElementById("out").textContent = "RESULT" + JSON.stringify(found);
    return;
  }
  frame.onload = () => {
    const doc = frame.contentDocument;
    const imgs = Array.from(doc.images);
    Promise.all(imgs.map(im => im.complete ? 0 : new Promise(r => {
      im.onload = im.onerror = r;
    }))).then(() => {
      found[pages[i]] = check(doc, frame.contentWindow);
      next(i + 1);
    });
  };
  frame.src = pages[i];
}
next(0);
</script></body></html>
"""


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no Chromium (apt-get install chromium)")
def test_every_page_in_a_browser(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    pages = sorted(
        "/" + str(p.relative_to(site).parent).replace("\\", "/").strip(".") + "/"
        for p in site.rglob("index.html")
        if "assets" not in p.parts and "search" not in p.parts
    )
    pages = [p.replace("//", "/") for p in pages]
    (site / "_harness.html").write_text(HARNESS % {"width": WIDTH, "pages": json.dumps(pages)})
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/_harness.html"
        run = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             f"--window-size={WIDTH + 40},1000", "--virtual-time-budget=600000",
             "--dump-dom", url],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    finally:
        server.shutdown()
    text = run.stdout
    assert "RESULT" in text, f"the harness did not finish: {run.stderr[-2000:]}"
    found = json.loads(text.split("RESULT", 1)[1].split("</pre>", 1)[0].replace("&quot;", '"'))
    assert len(found) == len(pages) > 50
    bad = {page: problems for page, problems in found.items() if problems}
    assert bad == {}
