#!/usr/bin/env bash
# Re-create book/_vendor/_static/vendor/ (served as _static/vendor/): the JavaScript the built book needs, so that no
# page loads anything from a CDN. Not under book/_static: Jupyter Book 1 would add every .js file there to every page.
#   MathJax 3.2.2 (Apache-2.0): tex-mml-chtml.js, its CHTML woff-v2 fonts, TeX extensions (autoload), ui, a11y.
#   @jupyter-widgets/html-manager 1.0.15 (BSD-3-Clause): embed-amd.js (bundles the base and controls widgets).
#   requirejs 2.3.8 (MIT): require.js.
# Needs npm (the npm registry). The tarballs are checked against npm's recorded sha512 integrity by `npm pack`.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=book/_vendor/_static/vendor
tmp=$(mktemp -d)
(cd "$tmp" && npm pack --silent mathjax@3.2.2 @jupyter-widgets/html-manager@1.0.15 requirejs@2.3.8 >/dev/null)
for f in "$tmp"/*.tgz; do mkdir -p "${f%.tgz}"; tar xzf "$f" -C "${f%.tgz}"; done
rm -rf "$dest"; mkdir -p "$dest/mathjax/output/chtml/fonts" "$dest/mathjax/input/tex" "$dest/widgets"
mj="$tmp/mathjax-3.2.2/package"
cp "$mj/es5/tex-mml-chtml.js" "$dest/mathjax/"
cp -r "$mj/es5/output/chtml/fonts/woff-v2" "$dest/mathjax/output/chtml/fonts/"
cp -r "$mj/es5/input/tex/extensions" "$dest/mathjax/input/tex/"
cp -r "$mj/es5/ui" "$mj/es5/a11y" "$dest/mathjax/"
cp "$mj/LICENSE" "$dest/mathjax/LICENSE"
hm="$tmp/jupyter-widgets-html-manager-1.0.15/package"
cp "$hm/dist/embed-amd.js" "$dest/widgets/"
cp "$hm"/dist/*.woff2 "$hm"/dist/*.woff "$dest/widgets/" 2>/dev/null || true
cp "$hm/LICENSE" "$dest/widgets/LICENSE" 2>/dev/null || cp "$hm/../package/package.json" "$dest/widgets/package.json"
cp "$tmp/requirejs-2.3.8/package/require.js" "$dest/require.js"
cp "$tmp/requirejs-2.3.8/package/README.md" "$dest/require.README.md"
rm -rf "$tmp"
du -sh "$dest"
