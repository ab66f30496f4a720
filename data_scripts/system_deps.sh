#!/usr/bin/env bash
# The system packages `make test` and `make pdf` need beyond Python's: Debian's chromium (the headless-browser checks
# of the built book), TeX Live (the book as one PDF), g++ (torch.compile's inductor, for the compiled-gradient tests),
# and the tools of the grading jail (metacl_lite/course/jail.py): bwrap (bubblewrap), mount, useradd (passwd), and
# libseccomp (the submissions' seccomp filter, through pyseccomp); unshare (util-linux), with which tests compare.
# Each is installed with apt only when it is missing (as root, or through sudo), so on a machine that has them this
# does nothing.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v mount >/dev/null 2>&1 || need+=(mount)
PATH="$PATH:/usr/sbin:/sbin" command -v useradd >/dev/null 2>&1 || need+=(passwd)  # sbin: not on a user's PATH
PATH="$PATH:/sbin:/usr/sbin" ldconfig -p 2>/dev/null | grep 'libseccomp\.so\.2' >/dev/null || need+=(libseccomp2)  # not -q: pipefail
# `make pdf`: TeX Live's xelatex with the LaTeX packages Sphinx's output uses, latexmk, FreeFont (the book's Greek
# and symbols); and pdftotext, with which the PDF's test reads it (tests/test_book_pdf.py)
command -v xelatex >/dev/null 2>&1 && kpsewhich fncychap.sty >/dev/null 2>&1 && [ -n "$(fc-list FreeSerif)" ] \
  || need+=(texlive-xetex texlive-latex-extra texlive-fonts-recommended fonts-freefont-otf)
command -v latexmk >/dev/null 2>&1 || need+=(latexmk)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: this needs ${need[*]} (apt-get install ${need[*]}); run as root or install sudo" >&2; exit 2; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
echo "installing ${need[*]} (apt-get)"
$sudo apt-get install -y -qq "${need[@]}" >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}" >/dev/null; }
