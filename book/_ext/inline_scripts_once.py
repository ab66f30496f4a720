"""Each inline <script> once per page.

Sphinx 7.4 keeps an inline script that an extension adds after the builder started (sphinx-thebe's
`const THEBE_JS_URL = ...`, sphinx-togglebutton's selector) twice: once as added (file name None) and once re-added
from the registry before writing (file name ''), which its duplicate test tells apart. The second `const` throws a
SyntaxError on every page. This drops the repeat from each page's script list, after every other handler ran.
"""


def _once(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for js in context.get("script_files", []):
        key = (js.filename or "", js.priority, tuple(sorted(js.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _once, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
