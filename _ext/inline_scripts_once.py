"""Write each inline script of a page once.

Sphinx 7.x lists a body-only script (`app.add_js_file(None, body=...)`) twice when an
extension adds it after the HTML builder has started: once as given (filename `None`)
and once more from the registry (filename `''`) when writing begins. sphinx-thebe and
sphinx-togglebutton add theirs that way, so every page declared
`const THEBE_JS_URL` twice and the browser reported a SyntaxError. Sphinx 8 fixes this
(sphinx-doc/sphinx#13402), but Jupyter Book v1 needs Sphinx 7; until then this drops
the second copy of any script that is identical to an earlier one.
"""


def _key(script):
    return (
        getattr(script, "filename", script) or "",
        getattr(script, "priority", 500),
        tuple(sorted(getattr(script, "attributes", {}).items())),
    )


def write_each_script_once(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    # After the themes and extensions have added their scripts for the page.
    app.connect("html-page-context", write_each_script_once, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
