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
})();
