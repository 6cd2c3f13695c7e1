/* The API reference: Swagger UI over this server's /openapi.json (its own file: the
 * page's Content-Security-Policy allows no inline script). "Try it out" sends requests
 * to this server; give the tenant's keys with "Authorize". The groups start closed, so
 * the page opens on the introduction and the list of groups. */
(function () {
  "use strict";
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    docExpansion: "none",
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    tryItOutEnabled: false
  });

  // Swagger UI's own markup leaves a few things without a name or out of the keyboard's
  // reach: the copy buttons, the request body's editor and the scrolling code panes.
  // Named here as they appear, so screen readers and keyboards can use them.
  var FIXES = [
    [".copy-to-clipboard button:not([aria-label])", function (el) {
      el.setAttribute("aria-label", "Copy to the clipboard");
    }],
    ["textarea.body-param__text:not([aria-label])", function (el) {
      el.setAttribute("aria-label", "Request body (JSON)");
    }],
    ["pre.microlight:not([tabindex])", function (el) {
      el.setAttribute("tabindex", "0");
    }]
  ];
  var root = document.getElementById("swagger-ui");
  var pending = false;
  function fix() {
    pending = false;
    FIXES.forEach(function (pair) {
      root.querySelectorAll(pair[0]).forEach(pair[1]);
    });
  }
  new MutationObserver(function () {
    if (!pending) {
      pending = true;
      window.requestAnimationFrame(fix);
    }
  }).observe(root, {childList: true, subtree: true});
})();
