// Swagger UI over this server's own /openapi.json (a file, not inline: the pages' CSP has no 'unsafe-inline' scripts).
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "StandaloneLayout",
});
