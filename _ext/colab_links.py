"""An "Open in Colab" link under every download of a student notebook.

An assignment page offers its student notebook with `{download}`. Colab opens a
notebook straight from the public repository
(`COLAB/github/ORG/REPO/blob/BRANCH/PATH`), and a student notebook needs only NumPy,
PyTorch and matplotlib, which Colab has: so below the paragraph holding each download
of a notebook in an `assignment/` folder (or the Spanish edition's `assignment/es/`, see
language_switch.py) this adds a paragraph with that link. The
repository, branch and book folder are those of `_config.yml` (`repository:`), the
Colab address is `colab_assignment_url` (empty: no links).

The lessons get no such link: they import the course's package and read files beside
them, which Colab would not have (their launch button offers Binder, which builds the
repository's `binder/` environment).
"""

import posixpath
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes


def _repository(config):
    options = config.html_theme_options or {}
    url = (options.get("repository_url") or "").rstrip("/")
    match = re.match(r"https://github\.com/([^/]+/[^/]+)$", url)
    if not match:
        return None
    return (match.group(1), options.get("repository_branch") or "main",
            (options.get("path_to_docs") or "").strip("/"))


# The note's words in each edition's language; the Spanish names Colab's menus as its
# Spanish interface does.
WORDS = {
    "en": {"link": "Open {name} in Colab",
           "how": " (File → Save a copy in Drive keeps your work; File → Download → "
                  "Download .ipynb gives the file to submit)."},
    "es": {"link": "Abrir {name} en Colab",
           "how": " (Archivo → Guardar una copia en Drive conserva tu trabajo; Archivo → Descargar → "
                  "Descargar .ipynb te da el archivo que entregas)."},
}


def add_colab_links(app, doctree):
    base = (app.config.colab_assignment_url or "").rstrip("/")
    repository = _repository(app.config)
    if not base or repository is None:
        return
    org_repo, branch, book = repository
    docname = app.env.docname
    for download in list(doctree.findall(addnodes.download_reference)):
        target = download.get("reftarget", "")
        if target.startswith("/"):
            source = target.lstrip("/")
        else:
            source = posixpath.normpath(posixpath.join(posixpath.dirname(docname), target))
        folder = posixpath.dirname(source)
        if posixpath.basename(folder) != "assignment":  # the Spanish edition's assignment/es/
            folder = posixpath.dirname(folder)
        if not (source.endswith(".ipynb") and posixpath.basename(folder) == "assignment"
                and (Path(app.srcdir) / source).is_file()):
            continue
        path = posixpath.join(book, source) if book else source
        url = f"{base}/github/{org_repo}/blob/{branch}/{path}"
        name = posixpath.basename(source)
        words = WORDS.get(app.config.language, WORDS["en"])
        link = nodes.reference("", "", nodes.Text(words["link"].format(name=name)), refuri=url,
                               classes=["colab-link"])
        paragraph = download.parent
        while paragraph is not None and not isinstance(paragraph, nodes.paragraph):
            paragraph = paragraph.parent
        note = nodes.paragraph("", "", link, nodes.Text(words["how"]))
        if paragraph is None:
            download.parent.insert(download.parent.index(download) + 1, note)
        else:
            paragraph.parent.insert(paragraph.parent.index(paragraph) + 1, note)


def setup(app):
    app.add_config_value("colab_assignment_url", "https://colab.research.google.com", "env")
    app.connect("doctree-read", add_colab_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
