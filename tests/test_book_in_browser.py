"""The built book as a reader sees it: offline, in a real (headless) Chromium.

The book in `_build/html` (built by `make book`) is served on the loopback interface and
every HTML page of it is opened in Debian's Chromium, driven by playwright's sync API,
in a window 1280 px wide and again on a phone's 390 px:

* no request fails, no request leaves the loopback server (any is blocked and reported),
  and the console shows no error;
* every image loads, every equation is typeset by MathJax 3 (served by the book itself),
  every internal link and anchor resolves, and every cross-reference is resolved;
* every plot of an executed notebook appears on its page as an image;
* no code, and no output of an executed cell (printed text, a table), is wider than its
  box, and no figure is scaled below `MIN_FIGURE_SCALE` of its width to fit the column;
* search works offline;
* at both widths no page scrolls sideways: long inline code wraps, and a wide equation,
  table or code block scrolls inside its own box (an equation or table with a shadow at
  the edge that has more to show).

Files are checked too: no page asks for a script, a style or an image from another host,
every chapter offers the student version of its assignment, with a link that opens it in
Colab, the launch buttons of the lessons point at the course repository and Binder builds
what the lessons import, and no solution is anywhere in the build.

A full-page screenshot of every page of the table of contents is saved in
`_build/screenshots/` (or `$BOOK_SCREENSHOTS`), at 1280 px and (`...-390px.png`) at
390 px, for a person to look at.

Under pytest-xdist the browser tests run on one worker (`xdist_group("browser")`),
which starts one server and one Chromium for all of them.

The browser tests skip, with the reason, where playwright, Chromium (`/usr/bin/chromium`,
or `$CHROMIUM`) or the built book is missing.
"""

import functools
import html.parser
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
HTML = REPO / "_build" / "html"
EXECUTED = REPO / "_build" / "jupyter_execute"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(os.environ.get("BOOK_SCREENSHOTS", REPO / "_build" / "screenshots"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic",
    # Every request to another host goes to a proxy that is not there, and fails: only
    # the loopback server (which Chromium never proxies) can answer. Such requests are
    # also recorded, and reported, by the test.
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
]
# Markers of nbgrader source notebooks: reference solutions and hidden tests.
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS",
                    "### END HIDDEN TESTS", "=== BEGIN MARK SCHEME ===")
# `$...$` left in a page's text (outside code): math that was never typeset. As in
# pandoc, the opening `$` is followed by a non-space and the closing one preceded by a
# non-space and not followed by a digit, so that "$5 and $10" is no math.
INLINE_DOLLARS = re.compile(r"(?<![\\$])\$(?=[^\s$])[^$\n]{1,200}?(?<=[^\s$\\])\$(?![\d$])")
# A word that the book's search must find.
SEARCH_WORD = "attention"

BUILT = (HTML / "index.html").is_file()
needs_build = pytest.mark.skipif(not BUILT, reason=f"no built book in {HTML}: run `make book`")


def toc_files():
    """The documents of _toc.yml, in order: (the root, [each chapter's own files])."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    chapters = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                yield entry["file"]
            yield from walk(entry.get("sections"))

    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        for chapter in part.get("chapters", []):
            chapters.append(list(walk([chapter])))
    return toc["root"], chapters


def html_pages():
    """Every HTML page of the build, relative to it, both editions (the Spanish one in
    `es/`), outside Sphinx's asset folders (`_static`, `_sources`, `_downloads`, ...) and
    hidden ones."""
    if not BUILT:
        return []
    pages = [p.relative_to(HTML) for p in HTML.rglob("*.html")]
    return sorted(p.as_posix() for p in pages if not any(part.startswith(("_", ".")) for part in p.parts[:-1]))


def screenshot_pages():
    """Every page of the table of contents: the chapters' prose, lessons (with their
    plots) and assignment pages, and the back matter."""
    root, chapters = toc_files()
    return [f"{root}.html"] + [f"{file}.html" for files in chapters for file in files]


class Tags(html.parser.HTMLParser):
    """The start tags of an HTML file, and the ids and names that anchors may target."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.anchors = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        for key in ("id", "name"):
            if attrs.get(key):
                self.anchors.add(attrs[key])


@functools.lru_cache(maxsize=None)
def parse(path):
    tags = Tags()
    tags.feed(Path(path).read_text(encoding="utf-8", errors="replace"))
    return tags


def external(url):
    return url.startswith(("http:", "https:", "//", "ws:", "wss:", "ftp:"))


# --- the files of the build -------------------------------------------------------------

@needs_build
def test_every_page_of_the_toc_is_built():
    root, chapters = toc_files()
    missing = [f for f in [root] + sum(chapters, []) if not (HTML / f"{f}.html").is_file()]
    assert not missing, f"pages of _toc.yml missing from {HTML}: {missing}"


@needs_build
def test_no_solution_anywhere_in_the_build():
    """Reference solutions and hidden tests never reach the published book."""
    leaks = []
    for path in HTML.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            leaks += [f"{path.relative_to(HTML)}: {m!r}" for m in SOLUTION_MARKERS if m in text]
    assert not leaks, "solution markers in the built book:\n" + "\n".join(leaks)
    solutions = {p.read_bytes() for p in (REPO / "solutions").rglob("*.ipynb")}
    copies = [p for p in HTML.rglob("*.ipynb") if p.read_bytes() in solutions]
    assert not copies, f"reference solutions copied into the book: {copies}"


@needs_build
def test_no_page_asks_another_host_for_a_resource():
    """Scripts, styles, fonts, icons and images all come from the book itself."""
    loading_rels = {"stylesheet", "preload", "modulepreload", "prefetch", "preconnect",
                    "dns-prefetch", "icon", "shortcut", "manifest", "apple-touch-icon"}
    found = []
    for page in html_pages():
        for tag, attrs in parse(HTML / page).tags:
            urls = []
            if tag in {"script", "img", "iframe", "source", "audio", "video", "embed", "track"}:
                urls = [attrs.get("src") or "", attrs.get("srcset") or ""]
            elif tag == "link" and loading_rels & set((attrs.get("rel") or "").lower().split()):
                urls = [attrs.get("href") or ""]
            elif tag == "object":
                urls = [attrs.get("data") or ""]
            found += [f"{page}: <{tag}> {u}" for u in urls if external(u.strip())]
    assert not found, "resources from other hosts:\n" + "\n".join(found)


@needs_build
def test_every_chapter_offers_its_assignment_for_download():
    """A chapter with a student notebook links to a download of exactly that notebook."""
    _, chapters = toc_files()
    checked = 0
    for files in chapters:
        folder = REPO / Path(files[0]).parent
        students = sorted((folder / "assignment").glob("*.ipynb"))
        if not students:
            continue
        offered = {}
        for f in files:
            page = HTML / f"{f}.html"
            for tag, attrs in parse(page).tags:
                href = attrs.get("href") or ""
                if tag == "a" and "download" in attrs and href.endswith(".ipynb"):
                    target = (page.parent / urllib.parse.unquote(href)).resolve()
                    if target.is_file():
                        offered[target.name] = target.read_bytes()
        for student in students:
            assert student.name in offered, (
                f"no page of chapter {folder.name} offers {student.name} for download")
            assert offered[student.name] == student.read_bytes(), (
                f"the download of {student.name} differs from {student.relative_to(REPO)}")
            checked += 1
    assert checked or not any((REPO / "book").glob("*/assignment/*.ipynb")), \
        "student notebooks exist but no chapter in _toc.yml offers them"


def repository_config():
    """(repository URL, "org/repo", branch, book folder in the repository) of _config.yml."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repo = config["repository"]["url"].rstrip("/")
    org_repo = urllib.parse.urlparse(repo).path.strip("/")
    book = (config["repository"].get("path_to_book") or "").strip("/")
    return repo, org_repo, config["repository"]["branch"], book


@needs_build
def test_launch_buttons_point_at_the_course_repository():
    """Every lesson page launches its notebook on Binder, from the course repository.

    No Colab button: Colab opens the one notebook, and every lesson imports the course's
    package and reads files beside it (`test_binder_builds_what_the_lessons_import`)."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repo, org_repo, branch, _ = repository_config()
    buttons = config.get("launch_buttons", {})
    expected = {
        "binderhub_url": f"{buttons.get('binderhub_url', '').rstrip('/')}/v2/gh/{org_repo}/{branch}?",
        "jupyterhub_url": f"{buttons.get('jupyterhub_url', '').rstrip('/')}/hub/user-redirect/git-pull?",
    }
    expected = {k: v for k, v in expected.items() if buttons.get(k)}
    assert "binderhub_url" in expected, "the Binder button is configured"
    assert not buttons.get("colab_url"), (
        "a Colab button on the lessons opens a notebook without the course's package and "
        "the files beside it")
    notebooks = [p for p in html_pages() if (EXECUTED / p).with_suffix(".ipynb").is_file()]
    if not notebooks:
        pytest.skip("no executed notebook page in the book yet")
    for page in notebooks:
        links = [a.get("href") or "" for t, a in parse(HTML / page).tags if t == "a"]
        source = Path(page).with_suffix(".ipynb").as_posix()
        for key, prefix in expected.items():
            hits = [h for h in links if h.startswith(prefix)]
            assert hits, f"{page}: no launch button for {key} (a link starting {prefix})"
            assert all(source in urllib.parse.unquote(h) for h in hits), (
                f"{page}: the {key} button does not open {source}: {hits}")
        colab = [h for h in links if "colab.research.google.com" in h]
        assert not colab, f"{page}: a Colab link on a lesson: {colab}"
        assert repo in links, f"{page}: no repository button linking to {repo}"


def requirement_pins(path):
    """{normalised distribution name: the line's specifier} of a requirements file."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0]
            pins[re.sub(r"[-_.]+", "-", name).lower()] = line[len(name):].strip()
    return pins


def test_binder_builds_what_the_lessons_import():
    """The Binder button works: binder/ installs every package that a lesson or the
    course's package imports, at the versions of requirements.txt, and then the course's
    package itself; Binder starts in a clone of the repository, so each lesson finds
    the files beside it."""
    binder = REPO / "binder"
    pins = requirement_pins(binder / "requirements.txt")
    course_pins = requirement_pins(REPO / "requirements.txt")
    different = {n: (s, course_pins.get(n)) for n, s in pins.items() if course_pins.get(n) != s}
    # scikit-learn comes with sentence-transformers in requirements.txt; the course imports it
    different.pop("scikit-learn", None)
    assert not different, f"binder/requirements.txt pins other versions than requirements.txt: {different}"
    post_build = (binder / "postBuild").read_text()
    assert re.search(r"pip install .*-e \.\s*$", post_build, re.M), \
        "binder/postBuild installs the course's package"
    assert os.access(binder / "postBuild", os.X_OK), "binder/postBuild is executable"
    modules = {}
    sources = [(p, "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"]
                              if c["cell_type"] == "code"))
               for p in sorted((REPO / "book").glob("*/lesson*.ipynb"))]
    sources += [(p, p.read_text()) for p in sorted((REPO / "course").rglob("*.py"))]
    for path, text in sources:
        # `from X... import` or `import X`: not a docstring's line that starts "from the ..."
        statement = r"^\s*(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import\b|import\s+([A-Za-z_]\w*))"
        for match in re.finditer(statement, text, re.M):
            modules.setdefault(match.group(1) or match.group(2), path.relative_to(REPO).as_posix())
    distributions = {"sklearn": "scikit-learn", "yaml": "pyyaml"}
    missing = {}
    for module, where in modules.items():
        if module in sys.stdlib_module_names or module in {"course", "autograder", "__future__"}:
            continue
        name = distributions.get(module, re.sub(r"[-_.]+", "-", module).lower())
        if name not in pins:
            missing[module] = where
    assert not missing, f"imported by the lessons or `course`, not installed by binder/: {missing}"


@needs_build
def test_assignment_pages_open_in_colab():
    """Each page that offers a student notebook for download also opens that notebook,
    from the course repository, in Colab (it needs only NumPy, PyTorch and matplotlib)."""
    _, org_repo, branch, book = repository_config()
    prefix = f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/"
    checked = 0
    for page in html_pages():
        tags = parse(HTML / page).tags
        downloads = [a.get("href") or "" for t, a in tags
                     if t == "a" and "download" in a and (a.get("href") or "").endswith(".ipynb")]
        if not downloads:
            continue
        colab = [a.get("href") or "" for t, a in tags if t == "a"
                 and (a.get("href") or "").startswith(prefix)]
        for href in downloads:
            name = Path(urllib.parse.unquote(href)).name
            # the Spanish edition's pages offer assignment/es/NAME (_ext/language_switch.py)
            hits = [c for c in colab if c.endswith((f"/assignment/{name}", f"/assignment/es/{name}"))]
            assert hits, f"{page}: offers {name} for download but no link opens it in Colab"
            for hit in hits:
                path = hit[len(prefix):]
                source = REPO / (path[len(book):].lstrip("/") if book else path)
                assert source.is_file(), f"{page}: the Colab link names {path}, not in the repository"
                assert source.read_bytes() == (HTML / page).parent.joinpath(
                    urllib.parse.unquote(href)).resolve().read_bytes(), (
                    f"{page}: Colab would open {path}, which differs from the download")
            checked += 1
    assert checked or not any((REPO / "book").glob("*/assignment/*.ipynb")), \
        "student notebooks exist but no page offers them"


# --- the book in a browser --------------------------------------------------------------

class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    if not BUILT:
        pytest.skip(f"no built book in {HTML}: run `make book`")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(HTML)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(server):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian package `chromium`; or set $CHROMIUM)")
    profile = tempfile.mkdtemp(prefix="book-chromium-")
    try:
        with sync_api.sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900}, service_workers="block")
            yield context
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Visit:
    """One page opened in the browser, with everything that went wrong while it loaded."""

    def __init__(self, context, origin, path, viewport=None):
        self.origin, self.problems, self.blocked, self.pending = origin, [], [], set()
        self.page = page = context.new_page()
        if viewport:
            page.set_viewport_size(viewport)
        page.on("request", self.request)
        page.on("requestfinished", self.finished)
        page.on("requestfailed", self.failed)
        page.on("response", self.response)
        page.on("console", self.console)
        page.on("pageerror", lambda error: self.problems.append(f"uncaught error: {error}"))
        page.goto(f"{origin}/{path}", wait_until="load")

    def request(self, request):
        self.pending.add(request)
        if not request.url.startswith((self.origin + "/", "data:", "blob:", "about:")):
            self.blocked.append(request.url)

    def finished(self, request):
        self.pending.discard(request)

    def failed(self, request):
        self.pending.discard(request)
        if request.url not in self.blocked:
            self.problems.append(f"request failed: {request.url} ({request.failure})")

    def response(self, response):
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def console(self, message):
        if message.type == "error":
            self.problems.append(f"console error: {message.text} at {message.location}")

    def settle(self):
        """Wait until MathJax has typeset the page, its fonts are in, and every request
        of the page has finished (or failed)."""
        self.page.evaluate("""async () => {
            if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                await MathJax.startup.promise;
            }
            await document.fonts.ready;
        }""")
        # Not Playwright's "networkidle", which Chromium sometimes never signals on a page
        # whose requests have all finished. Events arrive while Playwright waits.
        for _ in range(600):
            if not self.pending:
                break
            self.page.wait_for_timeout(50)
        self.problems += [f"request never finished: {r.url}" for r in self.pending]


@pytest.fixture
def visit(browser, server):
    visits = []

    def open_page(path, viewport=None):
        visits.append(Visit(browser, server, path, viewport))
        return visits[-1]

    yield open_page
    for v in visits:
        v.page.close()


# A figure of a lesson shown below this fraction of its width has text too small to read.
MIN_FIGURE_SCALE = 0.6
PAGE_FACTS = r"""async () => {
    const MIN_FIGURE_SCALE = %MIN_FIGURE_SCALE%;
    const imgs = Array.from(document.images);
    imgs.forEach(img => { img.loading = "eager"; });
    await Promise.all(imgs.map(img => img.decode().catch(() => null)));
    const outside = "pre, code, script, style, textarea, mjx-container, .highlight";
    const body = document.body.cloneNode(true);
    body.querySelectorAll(outside).forEach(e => e.remove());
    const math = Array.from(document.querySelectorAll(".math"));
    return {
        url: location.href,
        images: imgs.map(img => ({src: img.getAttribute("src"),
                                  ok: img.complete && img.naturalWidth > 0})),
        outputImages: document.querySelectorAll(".cell_output img").length,
        text: body.textContent,
        math: math.length,
        displayMath: document.querySelectorAll("div.math").length,
        untypeset: math.filter(e => !e.querySelector("mjx-container"))
                       .map(e => e.textContent.slice(0, 80)),
        displayTypeset: document.querySelectorAll('div.math mjx-container[display="true"]').length,
        mathErrors: Array.from(document.querySelectorAll("mjx-merror, [data-mjx-error]"))
                         .map(e => e.getAttribute("data-mjx-error") || e.textContent),
        mathjax: window.MathJax && window.MathJax.version || null,
        // Display equations wider than the text column, or drawn over their number.
        crowded: Array.from(document.querySelectorAll("div.math")).map(div => {
            const math = div.querySelector("mjx-container > mjx-math");
            if (!math) return null;
            const column = div.getBoundingClientRect(), box = math.getBoundingClientRect();
            const number = div.querySelector(".eqno");
            const n = number && number.getBoundingClientRect();
            const overNumber = n && box.right > n.left && box.left < n.right
                               && box.bottom > n.top && box.top < n.bottom;
            const outside = box.right > column.right + 1 || box.left < column.left - 1;
            if (!overNumber && !outside) return null;
            const items = MathJax.startup.document.getMathItemsWithin(div);
            const tex = items.length ? items[0].math.trim().replace(/\s+/g, " ").slice(0, 60) : "";
            return (number ? number.firstChild.textContent.trim() + " " : "") + `"${tex}..." `
                   + (overNumber ? "runs into its number" : "is wider than the column");
        }).filter(Boolean),
        // Code blocks (lesson cells, code in the text) wider than their column: cut off
        // on the page unless the reader scrolls sideways.
        wideCode: Array.from(document.querySelectorAll(".cell_input pre, div.highlight pre"))
                       .filter(pre => !pre.closest(".cell_output") && pre.scrollWidth > pre.clientWidth + 1)
                       .map(pre => pre.textContent.split("\n")
                                      .reduce((a, b) => (b.length > a.length ? b : a), "").slice(0, 80)),
        // Outputs of executed cells (printed text, tables, figures) wider than their box:
        // cut off at the right edge. A figure is never cut (the theme scales it down to
        // the column), but one scaled below MIN_FIGURE_SCALE of its size has text too
        // small to read (10-point labels under 8 px).
        wideOutputs: Array.from(document.querySelectorAll(".cell_output pre, .cell_output table"))
                          .filter(e => e.scrollWidth > e.clientWidth + 1
                                       || e.getBoundingClientRect().right
                                          > e.closest(".cell_output").getBoundingClientRect().right + 1)
                          .map(e => `${e.tagName.toLowerCase()} ${Math.round(e.scrollWidth)} px in a `
                                    + `${Math.round(e.closest(".cell_output").clientWidth)} px box: `
                                    + JSON.stringify(e.textContent.split("\n")
                                        .reduce((a, b) => (b.length > a.length ? b : a), "").slice(0, 80))),
        shrunkFigures: Array.from(document.querySelectorAll(".cell_output img"))
                            .filter(img => img.naturalWidth > 0
                                    && (img.getBoundingClientRect().width < MIN_FIGURE_SCALE * img.naturalWidth
                                        || img.getBoundingClientRect().right
                                           > img.closest(".cell_output").getBoundingClientRect().right + 1))
                            .map(img => `${img.getAttribute("src")}: ${img.naturalWidth} px shown at `
                                        + `${Math.round(img.getBoundingClientRect().width)} px`),
        unresolved: Array.from(document.querySelectorAll(".xref"))
                         .filter(e => !e.closest("a")).map(e => e.textContent),
        links: Array.from(document.querySelectorAll("a[href]"))
                    .map(a => ({href: a.getAttribute("href"), url: a.href})),
    };
}"""


def plots_expected(page):
    """How many plots (image outputs) the executed notebook behind a page shows, less
    those of removed cells; None for a page that is no notebook.

    The executed notebook is the one jupyter-cache keeps (`execute_notebooks: cache`),
    else the copy myst-nb writes to `_build/jupyter_execute`."""
    notebook = None
    source = (REPO / page).with_suffix(".ipynb")
    executed = (EXECUTED / page).with_suffix(".ipynb")
    if source.is_file() and (REPO / "_build" / ".jupyter_cache").is_dir():
        import nbformat
        from jupyter_cache import get_cache

        try:
            cache = get_cache(REPO / "_build" / ".jupyter_cache")
            record = cache.match_cache_notebook(nbformat.read(source, as_version=4))
            notebook = cache.get_cache_bundle(record.pk).nb
        except KeyError:  # not executed in the cache: the build must have used the file
            notebook = None
    if notebook is None and executed.is_file():
        notebook = json.loads(executed.read_text())
    if notebook is None:
        return None
    removed = {"remove-output", "remove-cell", "remove_output", "remove_cell"}
    count = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code" or removed & set(cell.get("metadata", {}).get("tags", [])):
            continue
        for output in cell.get("outputs", []):
            if any(mime.startswith("image/") for mime in output.get("data", {})):
                count += 1
    return count


def broken_links(page, facts, origin):
    """Links into the book whose file or anchor does not exist in the build."""
    broken = []
    for link in facts["links"]:
        url = urllib.parse.urlsplit(link["url"])
        if f"{url.scheme}://{url.netloc}" != origin:
            continue
        target = HTML / urllib.parse.unquote(url.path).lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"{link['href']} (no {target.relative_to(HTML)} in the build)")
        elif url.fragment and target.suffix == ".html":
            anchor = urllib.parse.unquote(url.fragment)
            if anchor not in parse(target).anchors:
                broken.append(f"{link['href']} (no anchor #{anchor} in {target.relative_to(HTML)})")
    return broken


# A phone's window: an iPhone 12 to 15 held upright, in CSS pixels.
PHONE = {"width": 390, "height": 844}
# What makes a page scroll sideways, and what is cut off inside the article.
SIDEWAYS = r"""() => {
    const view = document.documentElement.clientWidth;
    const width = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
    const describe = (e, right) => {
        const cls = (e.getAttribute("class") || "").trim().split(/\s+/).filter(Boolean)
                    .slice(0, 2).map(c => "." + c).join("");
        const text = (e.textContent || "").replace(/\s+/g, " ").trim().slice(0, 60);
        return `<${e.tagName.toLowerCase()}${cls}> ${JSON.stringify(text)} reaches `
               + `${Math.round(right)} px`;
    };
    // Elements whose box reaches past the window, the outermost of each such chain,
    // not inside a box that scrolls or clips, and not fixed to the window.
    const inBox = e => {
        for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
            const s = getComputedStyle(a);
            if (s.overflowX !== "visible" || s.position === "fixed") return true;
        }
        return false;
    };
    const wide = [];
    if (width > view) {
        for (const e of document.body.querySelectorAll("*")) {
            const r = e.getBoundingClientRect();
            if (r.width === 0 || r.right <= view + 1) continue;
            if (getComputedStyle(e).position === "fixed" || inBox(e)) continue;
            const parent = e.parentElement;
            if (parent && parent !== document.body
                && parent.getBoundingClientRect().right > view + 1) continue;
            wide.push(describe(e, r.right));
        }
    }
    // Inside the article: content cut off by a box that hides its overflow.
    const article = document.querySelector("article.bd-article") || document.body;
    const cut = [];
    for (const e of article.querySelectorAll("*")) {
        if (e.closest("mjx-assistive-mml, .visually-hidden, .headerlink")) continue;
        const r = e.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        for (let a = e.parentElement; a && article.contains(a); a = a.parentElement) {
            const s = getComputedStyle(a);
            if (s.overflowX === "visible") continue;
            if ((s.overflowX === "hidden" || s.overflowX === "clip")
                && r.right > a.getBoundingClientRect().right + 1
                && (e.parentElement === a
                    || e.parentElement.getBoundingClientRect().right <= a.getBoundingClientRect().right + 1)) {
                cut.push(describe(e, r.right) + ` in a ${Math.round(a.getBoundingClientRect().width)} px box`);
            }
            break;
        }
    }
    // Display equations wider than their box: they scroll in it, with a cue.
    const equations = Array.from(document.querySelectorAll("div.math mjx-container[display='true']"))
        .filter(m => m.scrollWidth > m.clientWidth + 1)
        .map(m => {
            const s = getComputedStyle(m);
            const items = MathJax.startup.document.getMathItemsWithin(m.parentElement);
            const tex = items.length ? items[0].math.trim().replace(/\s+/g, " ").slice(0, 60) : "";
            return {tex, scrolls: s.overflowX === "auto" || s.overflowX === "scroll",
                    cue: /gradient/.test(s.backgroundImage)};
        });
    // Tables of the text wider than their box: they scroll in it, with a cue.
    const tables = Array.from(document.querySelectorAll(".pst-scrollable-table-container"))
        .filter(c => c.scrollWidth > c.clientWidth + 1)
        .map(c => ({text: c.textContent.replace(/\s+/g, " ").trim().slice(0, 60),
                    cue: /gradient/.test(getComputedStyle(c).backgroundImage)}));
    return {view, width, wide: wide.slice(0, 8), cut: cut.slice(0, 8), equations, tables};
}"""


def sideways_problems(facts, window):
    """What makes a page wider than the window, or cuts off part of its article."""
    problems = []
    if facts["width"] > facts["view"]:
        problems.append(f"the page scrolls sideways at {window} px: {facts['width']} px wide "
                        f"in a {facts['view']} px window")
        problems += [f"  wider than the window: {w}" for w in facts["wide"]]
    problems += [f"cut off: {c}" for c in facts["cut"]]
    for eq in facts["equations"]:
        if not eq["scrolls"]:
            problems.append(f"display equation \"{eq['tex']}...\" is wider than its box, which "
                            f"does not scroll")
        elif not eq["cue"]:
            problems.append(f"display equation \"{eq['tex']}...\" scrolls in its box with no cue")
    problems += [f"table \"{table['text']}...\" scrolls in its box with no cue"
                 for table in facts["tables"] if not table["cue"]]
    return problems


def open_settled(visit, server, path, viewport=None):
    """A page opened (at `viewport`) and settled; the landing redirect is followed.
    Returns the visit and the path of the page it shows."""
    v = visit(path, viewport)
    refresh = [a for t, a in parse(HTML / path).tags
               if t == "meta" and (a.get("http-equiv") or "").lower() == "refresh"]
    if refresh:  # the landing redirect: follow it, then check where it lands
        target = refresh[0]["content"].split("url=", 1)[1].strip()
        v.page.wait_for_url(urllib.parse.urljoin(f"{server}/{path}", target))
        path = urllib.parse.urljoin(path, target)
    v.settle()
    return v, path


def screenshot(v, path, suffix=""):
    """A full-page screenshot of a page of the table of contents, for a person."""
    if path in screenshot_pages():
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / (path.removesuffix(".html").replace("/", "__") + suffix + ".png")
        v.page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of {path}: {shot}")


@needs_build
@pytest.mark.xdist_group("browser")
@pytest.mark.parametrize("path", html_pages() or ["index.html"])
def test_page_renders_offline(visit, server, path):
    v, path = open_settled(visit, server, path)
    facts = v.page.evaluate(PAGE_FACTS.replace("%MIN_FIGURE_SCALE%", str(MIN_FIGURE_SCALE)))
    problems = [f"image not loaded: {i['src']}" for i in facts["images"] if not i["ok"]]
    problems += [f"broken link: {b}" for b in broken_links(path, facts, server)]
    problems += [f"unresolved reference: {t!r}" for t in facts["unresolved"]]
    for raw in ("$$", "\\[", "\\]", "\\begin{"):
        if raw in facts["text"]:
            at = facts["text"].index(raw)
            problems.append(f"raw TeX {raw!r} in the text: ...{facts['text'][at - 40:at + 40]!r}...")
    problems += [f"raw TeX {m.group()!r} in the text" for m in INLINE_DOLLARS.finditer(facts["text"])]
    if facts["math"]:
        if not (facts["mathjax"] or "").startswith("3."):
            problems.append(f"math on the page but no MathJax 3 (MathJax {facts['mathjax']})")
        problems += [f"equation not typeset: {t!r}" for t in facts["untypeset"][:5]]
        if len(facts["untypeset"]) > 5:
            problems.append(f"... {len(facts['untypeset'])} equations not typeset in all")
        if facts["displayTypeset"] < facts["displayMath"]:
            problems.append(f"{facts['displayMath']} display equations, "
                            f"{facts['displayTypeset']} typeset as display math")
        problems += [f"MathJax error: {e!r}" for e in facts["mathErrors"]]
        problems += [f"display equation {c}" for c in facts["crowded"]]
    problems += [f"code wider than its column: {line!r}" for line in facts["wideCode"]]
    problems += [f"output wider than its box: {line}" for line in facts["wideOutputs"]]
    problems += [f"figure shrunk below {MIN_FIGURE_SCALE:.0%} of its width to fit its column "
                 f"(its text is too small to read): {line}" for line in facts["shrunkFigures"]]
    plots = plots_expected(path)
    if plots and facts["outputImages"] < plots:
        problems.append(f"the executed notebook has {plots} plots, the page's cell outputs "
                        f"{facts['outputImages']} images")
    problems += sideways_problems(v.page.evaluate(SIDEWAYS), 1280)
    screenshot(v, path)
    problems = v.problems + [f"blocked a request to another host: {u}" for u in v.blocked] + problems
    assert not problems, f"{path} in Chromium (screenshots in {SCREENSHOTS}):\n" + "\n".join(problems)


@needs_build
@pytest.mark.xdist_group("browser")
@pytest.mark.parametrize("path", html_pages() or ["index.html"])
def test_page_fits_a_phone(visit, server, path):
    """At 390 px the page does not scroll sideways: long inline code wraps, and what is
    wider than the column (an equation, a table, code, an output) scrolls in its own
    box, equations and tables with a shadow at the edge that has more to show."""
    v, path = open_settled(visit, server, path, PHONE)
    problems = sideways_problems(v.page.evaluate(SIDEWAYS), PHONE["width"])
    screenshot(v, path, f"-{PHONE['width']}px")
    problems = v.problems + [f"blocked a request to another host: {u}" for u in v.blocked] + problems
    assert not problems, (f"{path} in Chromium at {PHONE['width']} px (screenshots in "
                          f"{SCREENSHOTS}):\n" + "\n".join(problems))


@needs_build
@pytest.mark.xdist_group("browser")
def test_search_works_offline(visit):
    v = visit(f"search.html?q={SEARCH_WORD}")
    v.page.wait_for_selector("#search-results .search-summary", state="attached")
    v.settle()
    results = v.page.locator("#search-results li").count()
    problems = v.problems + [f"blocked a request to another host: {u}" for u in v.blocked]
    assert results > 0, f"searching for {SEARCH_WORD!r} found nothing"
    assert not problems, "search.html in Chromium:\n" + "\n".join(problems)
