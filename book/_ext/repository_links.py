"""The links to the book's repository and the launch buttons, from one setting: where the repository is.

The setting is Jupyter Book's `repository.url` in book/_config.yml (https://github.com/OWNER/NAME), or the
environment's BOOK_REPOSITORY (OWNER/NAME or that URL), which `make book REPOSITORY=OWNER/NAME` sets and which wins.

- Given, every page shows sphinx-book-theme's repository, "open issue" and "suggest edit" links (switched on here:
  Jupyter Book refuses them in _config.yml while the URL is empty), and every page that is a notebook the launch
  buttons `launch_buttons` configures: Binder (`binderhub_url`) and a JupyterHub (`jupyterhub_url`, or the
  environment's BOOK_JUPYTERHUB, set by `make book JUPYTERHUB=URL`) open the page's MyST notebook in the repository
  (binder/ holds the environment and the setting with which jupytext opens it as a notebook); Colab (`colab_url`)
  opens the page's executed notebook, the one the page offers for download (_sources/<page>.ipynb), from the branch
  `colab_notebooks_branch` to which the publishing workflow (.github/workflows/book.yml) pushes them: Colab opens
  notebooks from GitHub, not from a web site, and the theme's own Colab link would open the MyST source instead.
- Not given, none of them is shown, and nothing else changes (the theme fails on launch buttons without a
  repository, so they are switched off too).
"""
import os
import re
from urllib.parse import quote

from sphinx.errors import ConfigError

ENV_REPOSITORY = "BOOK_REPOSITORY"
ENV_JUPYTERHUB = "BOOK_JUPYTERHUB"
REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button")
OWNER_NAME = re.compile(r"(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<name>[A-Za-z0-9._-]+)")
GITHUB = re.compile(r"https://github\.com/" + OWNER_NAME.pattern + r"/?")


def repository_url(configured: str, environ=os.environ) -> str:
    """The repository's URL: BOOK_REPOSITORY where set, else `configured` (the config's repository.url); "" where
    neither is given. Either may be OWNER/NAME or https://github.com/OWNER/NAME: GitHub only, as Binder's and Colab's
    links here are GitHub's."""
    given = (environ.get(ENV_REPOSITORY) or "").strip() or (configured or "").strip()
    if not given:
        return ""
    mo = OWNER_NAME.fullmatch(given) or GITHUB.fullmatch(given)
    if not mo:
        where = ENV_REPOSITORY if (environ.get(ENV_REPOSITORY) or "").strip() else "repository.url"
        raise ConfigError(f"{where} is {given!r}: give a GitHub repository as OWNER/NAME or "
                          f"https://github.com/OWNER/NAME (or nothing, for a book without repository links)")
    name = mo.group("name").removesuffix(".git")  # the clone address names the same repository
    return f"https://github.com/{mo.group('owner')}/{name}"


def theme_options(options: dict, environ=os.environ) -> tuple[dict, dict | None]:
    """The theme options with the repository links and launch buttons switched on where a repository is given and
    off where not, and what the Colab link needs ({"colab_url", "branch", "repository_url"}; None: no Colab link)."""
    opts = dict(options or {})
    launch = dict(opts.get("launch_buttons") or {})
    url = repository_url(opts.get("repository_url", ""), environ)
    hub = (environ.get(ENV_JUPYTERHUB) or "").strip()
    if hub and not re.fullmatch(r"https?://[^\s\"'<>]+", hub):
        raise ConfigError(f"{ENV_JUPYTERHUB} is {hub!r}: give the JupyterHub's address, https://...")
    if hub and not url:
        raise ConfigError(f"{ENV_JUPYTERHUB} opens a page's notebook from the book's repository, and none is given: "
                          f"set {ENV_REPOSITORY} (make book REPOSITORY=OWNER/NAME) too, or leave it out")
    if hub:
        launch["jupyterhub_url"] = hub
    colab_url = (launch.pop("colab_url", "") or "").strip().rstrip("/")  # ours, not the theme's (see above)
    branch = (launch.pop("colab_notebooks_branch", "") or "").strip()
    opts["repository_url"] = url
    for key in REPOSITORY_BUTTONS:
        opts[key] = bool(url)
    opts["launch_buttons"] = launch if url else {}
    colab = {"colab_url": colab_url, "branch": branch, "repository_url": url} if url and colab_url and branch else None
    return opts, colab


def colab_link(colab: dict, notebook: str) -> str:
    """The Colab address of `notebook` (its path in the branch, as under the book's _sources/)."""
    owner, name = colab["repository_url"].rsplit("/", 2)[-2:]
    return f"{colab['colab_url']}/github/{owner}/{name}/blob/{quote(colab['branch'])}/{quote(notebook)}"


def _configure(app, config):
    config.html_theme_options, app.repository_colab = theme_options(config.html_theme_options)


def _colab_button(app, pagename, templatename, context, doctree):
    """After the theme's launch buttons (priority 501): the Colab link of a page that has an executed notebook."""
    colab, notebook = getattr(app, "repository_colab", None), context.get("ipynb_source")
    if not colab or not notebook or "header_buttons" not in context:
        return
    button = {"type": "link", "text": "Colab", "tooltip": "Open the executed notebook in Colab",
              "icon": "_static/images/logo_colab.png", "url": colab_link(colab, notebook)}
    groups = [b for b in context["header_buttons"] if b.get("label") == "launch-buttons"]
    if groups:
        groups[0]["buttons"].append(button)
    else:
        context["header_buttons"].append({"type": "group", "tooltip": "Launch interactive content",
                                          "icon": "fas fa-rocket", "buttons": [button], "label": "launch-buttons"})


def setup(app):
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _colab_button, priority=510)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
