// book/_ext/accessibility.py says why: each slider of a widget takes its name from the widget's label (ipywidgets
// draws the handle with role="slider" and no name), as widgets render, on any page.
new MutationObserver(() => {
  for (const handle of document.querySelectorAll('.widget-slider [role="slider"]:not([aria-label])')) {
    const label = handle.closest('.widget-slider')?.querySelector('.widget-label');
    if (label && label.textContent.trim()) handle.setAttribute('aria-label', label.textContent.trim());
  }
}).observe(document.documentElement, {childList: true, subtree: true});
