// Loaded between require.js and the widget manager (vendor/widgets/embed-amd.js) on pages with widgets.
(function () {
  // 1. The manager's AMD modules resolve next to the vendored bundle, not next to the page: their icon fonts are
  //    fetched relative to the module's URL (vendor/widgets/*.woff2).
  var widgets = document.currentScript.src.replace(/[^/]*$/, "") + "vendor/widgets";
  require.config({paths: {"@jupyter-widgets": widgets, "@jupyter-widgets/html-manager/dist": widgets}});
  // 2. @jupyter-widgets/base typesets labels with MathJax 2's MathJax.Hub.Queue(["Typeset", hub, element]); the
  //    book runs MathJax 3, so map it onto MathJax.typesetPromise. MathJax 3 (a deferred script) has replaced the
  //    window.MathJax configuration object by DOMContentLoaded; the manager renders at load, later.
  document.addEventListener("DOMContentLoaded", function () {
    var mj = window.MathJax;
    if (!mj || !mj.startup || mj.Hub) return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset") {
            mj.startup.promise.then(function () { return mj.typesetPromise([job[2]]); });
          } else if (typeof job === "function") {
            job();
          }
        });
      }
    };
  });
})();
