"""The package version, the git commit and the build date in every page's footer.

    metacl-lite 0.1.0 · commit 27a9ed0 · built 2026-11-23

The version is the installed distribution's (importlib.metadata); the commit is `git rev-parse --short HEAD` of the
book's folder, with "+ local changes" when `git status` lists changed tracked files, and is left out when git or a
repository is absent (a copy of the book outside its checkout). The date is the build's, in UTC, or
SOURCE_DATE_EPOCH's where set (reproducible builds). Other extensions may append to the footer in their own
html-page-context handler (ipynb_download adds the notebooks download).
"""
import datetime as dt
import html
import importlib.metadata
import os
import subprocess


def version() -> str:
    try:
        return importlib.metadata.version("metacl-lite")
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def git_commit(folder) -> str | None:
    """The short commit of HEAD, "+ local changes" appended if tracked files differ from it; None without git."""
    def git(*args):
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "--short", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + (" + local changes" if dirty else "")


def build_date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)
    return when.date().isoformat()


def footer_text(folder) -> str:
    parts = [f"metacl-lite {version()}"]
    if (commit := git_commit(folder)) is not None:
        parts.append(f"commit {commit}")
    parts.append(f"built {build_date()}")
    return " · ".join(parts)


def _inited(app):
    app.book_build_info = footer_text(app.srcdir)  # once per build, not per page


def _page(app, pagename, templatename, context, doctree):
    info = f'<p class="build-info">{html.escape(app.book_build_info)}</p>'
    context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + info


def setup(app):
    app.connect("builder-inited", _inited)
    app.connect("html-page-context", _page, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
