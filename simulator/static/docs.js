/* The API reference: Swagger UI over this server's /openapi.json (its own file: the
 * page's Content-Security-Policy allows no inline script). "Try it out" sends requests
 * to this server; give the tenant's keys with "Authorize". */
(function () {
  "use strict";
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    tryItOutEnabled: false
  });
})();
