import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { HonoEnv } from "../services.js";

/** The pages' files: src/web beside the sources, copied to dist/web by the build. */
const WEB = dirname(fileURLToPath(import.meta.url));
const SWAGGER = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
};

/** Files a page may load, by URL path: nothing outside this list is served. */
const ASSETS: Record<string, string> = {
  "/assets/ferry.css": join(WEB, "ferry.css"),
  "/assets/playground.js": join(WEB, "playground.js"),
  "/assets/mnist-image.js": join(WEB, "mnist-image.js"),
  "/assets/dashboard.js": join(WEB, "dashboard.js"),
  "/docs/assets/swagger-ui.css": join(SWAGGER, "swagger-ui.css"),
  "/docs/assets/swagger-ui-bundle.js": join(SWAGGER, "swagger-ui-bundle.js"),
  "/docs/assets/swagger-ui-standalone-preset.js": join(SWAGGER, "swagger-ui-standalone-preset.js"),
  "/docs/assets/docs.js": join(WEB, "docs.js"),
};

const PAGES: Record<string, string> = {
  "/": join(WEB, "playground.html"),
  "/dashboard": join(WEB, "dashboard.html"),
  "/docs": join(WEB, "docs.html"),
};

/**
 * The playground, the dashboard and the API reference, served by the API itself: no CDN, so
 * they work offline. Files are read once, at first use.
 */
export function registerPages(app: OpenAPIHono<HonoEnv>): void {
  const cache = new Map<string, Buffer>();
  const send = (c: Context<HonoEnv>, file: string) => {
    let body = cache.get(file);
    if (!body) {
      body = readFileSync(file);
      cache.set(file, body);
    }
    const type = TYPES[file.slice(file.lastIndexOf("."))] ?? "application/octet-stream";
    c.header("Content-Type", type);
    // pages load only what this server serves
    c.header(
      "Content-Security-Policy",
      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'",
    );
    c.header("Cache-Control", "no-cache");
    return c.body(new Uint8Array(body));
  };
  for (const [path, file] of [...Object.entries(PAGES), ...Object.entries(ASSETS)])
    app.get(path, (c) => send(c, file));
}
