"""A link on every page to the same page in the book's other edition, and the sidebar's
captions in the page's language.

The English edition is built into `_build/html/` and the Spanish one, from the same
sources and the catalogs of `locales/es/`, into `_build/html/es/` (book/translating.md).
A page `book/intro` is therefore `book/intro.html` in one and `es/book/intro.html` in the
other, and the link is a plain relative address: it works offline, from `file://` as
from a server, and the browser test can follow it.

`language_editions` (conf) lists the editions as (language, folder under the English
edition's root, label): the English one has the folder "".

sphinx-external-toc adds the toctree of the root page, with the part captions of
`_toc.yml`, after Sphinx has translated the page, so a caption would stay in English; the
gettext builder still extracts it into the root page's catalog, and this extension
translates it from there. So does the book's title (`html_title`, the root page's title),
and the search field's placeholder, which Jupyter Book sets in English. And a download of
a student notebook gives the edition's own version of it, where there is one.
"""

import gettext
import html
import posixpath
from pathlib import Path

from sphinx import addnodes
from sphinx.util.i18n import docname_to_domain

DEFAULT_EDITIONS = [("en", "", "English"), ("es", "es", "Español")]
SEARCH_TEXT = {"es": "Buscar en este libro..."}


def _language(config):
    return (config.language or "en").split("_")[0]


def _edition_folder(editions, language):
    for code, folder, _label in editions:
        if code == language:
            return folder
    return None


def switch_links(config, pagename):
    """[(language, label, relative address)] of the page `pagename` in the other editions."""
    editions = config.language_editions or DEFAULT_EDITIONS
    here = _edition_folder(editions, _language(config))
    if here is None:
        return []
    # From this page up to the root of this edition, then up to the English root.
    depth = pagename.count("/") + (here.count("/") + 1 if here else 0)
    up = "../" * depth
    links = []
    for code, folder, label in editions:
        if code == _language(config):
            continue
        target = posixpath.join(folder, pagename + ".html") if folder else pagename + ".html"
        links.append((code, label, up + target))
    return links


def add_switch(app, pagename, templatename, context, doctree):
    links = switch_links(app.config, pagename)
    if not links:
        return
    anchors = " · ".join(
        f'<a href="{html.escape(href)}" hreflang="{code}" lang="{code}" '
        f'class="language-switch-link">{html.escape(label)}</a>'
        for code, label, href in links)
    block = f'<nav class="language-switch" aria-label="Language">{anchors}</nav>\n'
    if "body" in context:
        context["body"] = block + context["body"]
    alternates = "".join(
        f'<link rel="alternate" hreflang="{code}" href="{html.escape(href)}" />\n'
        for code, _label, href in links)
    context["metatags"] = context.get("metatags", "") + alternates


def translate_captions(app, doctree):
    language = _language(app.config)
    if language == "en":
        return
    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    dirs = [str(Path(app.confdir, d)) for d in app.config.locale_dirs]
    for localedir in dirs:
        try:
            catalog = gettext.translation(domain, localedir, languages=[language])
        except OSError:
            continue
        for toctree in doctree.findall(addnodes.toctree):
            caption = toctree.get("caption")
            if caption:
                toctree["caption"] = catalog.gettext(caption)
        return


def translate_title(app):
    """The book's title and search placeholder in the edition's language."""
    language = _language(app.config)
    if language == "en":
        return
    options = app.config.html_theme_options
    if language in SEARCH_TEXT and isinstance(options, dict):
        options["search_bar_text"] = SEARCH_TEXT[language]
    try:
        from babel.messages.pofile import read_po
    except ImportError:
        return
    domain = docname_to_domain(app.config.root_doc, app.config.gettext_compact)
    for localedir in app.config.locale_dirs:
        path = Path(app.confdir, localedir, language, "LC_MESSAGES", domain + ".po")
        if path.is_file():
            with open(path, "rb") as f:
                message = read_po(f).get(app.config.html_title)
            if message is not None and message.string and not message.fuzzy:
                app.config.html_title = message.string
            return


def translated_downloads(app, doctree):
    """In the Spanish edition, a download of a student notebook (`assignment/NAME.ipynb`)
    gives the Spanish version that `make release` writes beside it
    (`assignment/es/NAME.ipynb`, autograder/release.py), where there is one. The catalogs
    keep the English target (tests/test_translations.py): the target is changed here,
    before Sphinx collects the page's downloads. The file keeps its name, NAME.ipynb,
    which the grader expects."""
    language = _language(app.config)
    if language == "en":
        return
    for node in doctree.findall(addnodes.download_reference):
        target = node.get("reftarget", "")
        folder, name = posixpath.split(target)
        if not name.endswith(".ipynb") or posixpath.basename(folder) != "assignment":
            continue
        translated = posixpath.join(folder, language, name)
        _relative, filename = app.env.relfn2path(translated, app.env.docname)
        if Path(filename).is_file():
            node["reftarget"] = translated


def setup(app):
    app.add_config_value("language_editions", DEFAULT_EDITIONS, "html")
    # before Sphinx's DownloadFileCollector (priority 500) copies the file to _downloads/
    app.connect("doctree-read", translated_downloads, priority=400)
    app.connect("builder-inited", translate_title)
    app.connect("html-page-context", add_switch)
    # after sphinx-external-toc has inserted the root page's toctree
    app.connect("doctree-read", translate_captions, priority=900)
    app.add_css_file("language_switch.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
