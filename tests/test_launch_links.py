"""One setting for the repository (issue 42): `repository.url` in book/_config.yml, or `make book REPOSITORY=OWNER/NAME`,
turns on the repository, issue and edit links and the launch buttons (book/_ext/repository_links.py). A two-page book
with the book's own configuration is built both ways: without the setting no page shows any of them (and the build
still passes); with it, every launch link of a page opens that page's own notebook: Binder and JupyterHub its MyST
source in the repository, Colab its executed notebook, as the page offers it for download, from the branch the
publishing workflow pushes the notebooks to."""
import html as H
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "data_scripts"))
import repository_links as L  # noqa: E402
from check_offline_book import static_check  # noqa: E402
from conftest import build_book  # noqa: E402

OWNER, NAME = "example-owner", "example-book"  # made up: the repository is not published yet
REPO = f"https://github.com/{OWNER}/{NAME}"
HUB = "https://hub.example.org"
PAGES = ("intro", "chapters/page")  # the root page and one in a folder: the paths must follow the page
NOTEBOOK = """---
jupytext:
  text_representation: {{extension: .md, format_name: myst}}
kernelspec: {{display_name: Python 3, language: python, name: python3}}
---

# {title}

```{{code-cell}} ipython3
"{title}".upper()
```
"""


def _config() -> dict:
    return yaml.safe_load((ROOT / "book" / "_config.yml").read_text())


def _mini_book(tmp: Path, config: dict | None = None) -> Path:
    """The book's configuration, extensions and vendored assets, with two MyST notebook pages."""
    book = tmp / "book"
    book.mkdir(parents=True)
    for folder in ("_ext", "_vendor"):
        shutil.copytree(ROOT / "book" / folder, book / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "book" / "references.bib", book)
    if config is None:
        shutil.copy(ROOT / "book" / "_config.yml", book)
    else:
        (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapters/page\n")
    (book / "chapters").mkdir()
    (book / "intro.md").write_text(NOTEBOOK.format(title="A mini book"))
    (book / "chapters" / "page.md").write_text(NOTEBOOK.format(title="1. A page"))
    return book


def _build(tmp: Path, config: dict | None = None, env: dict | None = None) -> tuple[Path, Path]:
    book = _mini_book(tmp, config)
    saved = {k: os.environ.get(k) for k in (L.ENV_REPOSITORY, L.ENV_JUPYTERHUB)}
    try:  # build_book runs jupyter-book with this process's environment
        for k in saved:
            os.environ.pop(k, None)
        os.environ.update(env or {})
        r = build_book(book, tmp / "out")
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return book, tmp / "out" / "_build" / "html"


def _dropdown(page: str, label: str) -> list[list[str]]:
    """The links (href, unescaped) of each header dropdown `label` ("launch-buttons", "source-buttons") of a page."""
    groups = re.findall(rf'<div class="dropdown dropdown-{label}">(.*?)</div>', page, re.S)
    return [[H.unescape(h) for h in re.findall(r'<a href="([^"]+)"', g)] for g in groups]


def _launch_targets(links: list[str]) -> dict[str, str]:
    """Each launch link as provider -> the file it opens (its path in the repository, or in the notebooks' branch)."""
    out = {}
    for link in links:
        u = urlsplit(link)
        if link.startswith("https://mybinder.org/"):
            assert u.path == f"/v2/gh/{OWNER}/{NAME}/main", link
            out["Binder"] = unquote(parse_qs(u.query)["urlpath"][0]).removeprefix("lab/tree/")
        elif link.startswith(HUB + "/"):
            q = parse_qs(u.query)
            assert u.path == "/hub/user-redirect/git-pull" and q["repo"] == [REPO] and q["branch"] == ["main"], link
            out["JupyterHub"] = q["urlpath"][0].removeprefix(f"lab/tree/{NAME}/")
        elif link.startswith("https://colab.research.google.com/"):
            prefix = f"/github/{OWNER}/{NAME}/blob/executed-notebooks/"
            assert u.path.startswith(prefix), link
            out["Colab"] = unquote(u.path.removeprefix(prefix))
        else:
            raise AssertionError(f"a launch link to an unknown place: {link}")
    assert len(out) == len(links), links  # one link per provider
    return out


@pytest.mark.slow
def test_without_the_repository_no_page_shows_its_links_and_with_it_every_launch_link_opens_the_pages_notebook(
        tmp_path):
    # Without the setting (the book's configuration as committed): nothing shown, and the build passes.
    assert _config()["repository"]["url"] == ""
    book, html = _build(tmp_path / "without")
    for page in PAGES:
        text = (html / f"{page}.html").read_text()
        assert _dropdown(text, "launch-buttons") == [] and _dropdown(text, "source-buttons") == [], page
        assert "github.com" not in text and "mybinder" not in text and "colab" not in text.lower(), page
        assert (html / "_sources" / f"{page}.ipynb").exists(), page  # the download button's notebook, as before
    assert static_check(html) == []

    # With it, in the book's config (a JupyterHub given too): each page's launch links open its own notebook.
    config = _config()
    config["repository"]["url"] = REPO
    config["launch_buttons"]["jupyterhub_url"] = HUB
    book, html = _build(tmp_path / "with", config)
    for page in PAGES:
        text = (html / f"{page}.html").read_text()
        [launch] = _dropdown(text, "launch-buttons")
        targets = _launch_targets(launch)
        assert targets == {"Binder": f"book/{page}.md", "JupyterHub": f"book/{page}.md", "Colab": f"{page}.ipynb"}
        assert (book / f"{page}.md").exists()  # the repository's path_to_book is book/: book/<page>.md is the page
        executed = json.loads((html / "_sources" / f"{page}.ipynb").read_text())  # what the workflow publishes
        outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
        title = re.search(r"^# (.*)$", (book / f"{page}.md").read_text(), re.M).group(1)
        assert ["".join(o["data"]["text/plain"]) for o in outputs] == [repr(title.upper())], page  # with its outputs
        [source] = _dropdown(text, "source-buttons")
        assert source[0] == REPO and source[1] == f"{REPO}/edit/main/book/{page}.md", page
        assert source[2].startswith(f"{REPO}/issues/new?") and len(source) == 3, page
    assert static_check(html) == []  # the buttons' icons are the theme's own files: nothing loaded from elsewhere


def test_the_setting_is_the_configs_url_or_the_environments_owner_and_name():
    """The theme options the extension makes from Jupyter Book's, for the config's URL and for BOOK_REPOSITORY (what
    `make book REPOSITORY=...` sets, which wins), with the book's own launch_buttons."""
    from jupyter_book.config import get_final_config

    def options(config: dict, environ: dict) -> tuple[dict, dict | None]:
        sphinx, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False})
        return L.theme_options(sphinx["html_theme_options"], environ)

    off, colab = options(_config(), {})
    assert colab is None and off["launch_buttons"] == {} and off["repository_url"] == ""
    assert not any(off[k] for k in L.REPOSITORY_BUTTONS)
    config = _config()
    config["repository"]["url"] = REPO
    by_config = options(config, {})
    by_env = options(_config(), {L.ENV_REPOSITORY: f"{OWNER}/{NAME}"})
    assert by_config == by_env
    on, colab = by_env
    assert on["repository_url"] == REPO and all(on[k] for k in L.REPOSITORY_BUTTONS)
    assert on["launch_buttons"]["binderhub_url"] == "https://mybinder.org" and "colab_url" not in on["launch_buttons"]
    assert on["path_to_docs"] == "book" and on["repository_branch"] == "main"
    assert L.colab_link(colab, "chapters/page.ipynb") == (
        f"https://colab.research.google.com/github/{OWNER}/{NAME}/blob/executed-notebooks/chapters/page.ipynb")
    hub, _ = options(_config(), {L.ENV_REPOSITORY: REPO + "/", L.ENV_JUPYTERHUB: HUB})
    assert hub["repository_url"] == REPO and hub["launch_buttons"]["jupyterhub_url"] == HUB
    assert options(_config(), {L.ENV_REPOSITORY: REPO + ".git"})[0]["repository_url"] == REPO  # a clone address
    for environ, needle in (({L.ENV_JUPYTERHUB: HUB}, "none is given"),  # a hub alone was dropped without a word
                            ({L.ENV_REPOSITORY: REPO, L.ENV_JUPYTERHUB: "javascript:alert(1)"}, "https://"),
                            ({L.ENV_REPOSITORY: REPO, L.ENV_JUPYTERHUB: "hub.example.org"}, "https://")):
        from sphinx.errors import ConfigError

        with pytest.raises(ConfigError, match=needle):
            options(_config(), environ)


@pytest.mark.parametrize("bad", ["owner", "https://gitlab.com/owner/name", "owner/name/extra", "git@github.com:o/n"])
def test_a_repository_that_is_not_owner_and_name_on_github_is_refused_naming_the_setting(bad):
    from sphinx.errors import ConfigError

    with pytest.raises(ConfigError, match=L.ENV_REPOSITORY):
        L.repository_url("", {L.ENV_REPOSITORY: bad})
    with pytest.raises(ConfigError, match="repository.url"):
        L.repository_url(bad, {})


def test_make_book_passes_repository_and_jupyterhub_to_the_build():
    """`make book REPOSITORY=... JUPYTERHUB=...` hands both to jupyter-book's environment (a dry run: nothing built)."""
    r = subprocess.run(["make", "-n", "book", f"REPOSITORY={OWNER}/{NAME}", f"JUPYTERHUB={HUB}"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    [build] = [ln for ln in r.stdout.replace("\\\n", " ").splitlines() if "jupyter-book build book" in ln]
    assert f'{L.ENV_REPOSITORY}="{OWNER}/{NAME}"' in build and f'{L.ENV_JUPYTERHUB}="{HUB}"' in build
    r = subprocess.run(["make", "-n", "book"], cwd=ROOT, capture_output=True, text=True)
    [build] = [ln for ln in r.stdout.replace("\\\n", " ").splitlines() if "jupyter-book build book" in ln]
    assert f'{L.ENV_REPOSITORY}=""' in build  # none given: none set (an empty one shows nothing)
