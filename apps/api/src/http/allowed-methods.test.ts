import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { allowedMethods } from "./allowed-methods.js";

describe("the methods a path is answered with", () => {
  const app = new Hono();
  app.use("*", async (_c, next) => next());
  app.post("/v1/chat/completions", (c) => c.text("ok"));
  app.get("/v1/files/:id", (c) => c.text("ok"));
  app.delete("/v1/files/:id", (c) => c.text("ok"));
  app.get("/v1/files/:id/content", (c) => c.text("ok"));
  app.get("/v2/models/:name/versions/:version{[0-9]+}", (c) => c.text("ok"));
  app.get("/v1/jobs/:id?", (c) => c.text("ok"));
  app.get("/admin/queues/*", (c) => c.text("ok"));
  const allowed = allowedMethods(app.routes);

  it("names the routes' methods, never the middleware's, HEAD beside GET", () => {
    expect(allowed("/v1/chat/completions")).toEqual(["POST"]);
    expect(allowed("/v1/files/file-1").sort()).toEqual(["DELETE", "GET", "HEAD"]);
    expect(allowed("/v1/files/file-1/content").sort()).toEqual(["GET", "HEAD"]);
    expect(allowed("/v1/jobs")).toContain("GET");
    expect(allowed("/v1/jobs/abc")).toContain("GET");
    expect(allowed("/admin/queues/api/queues")).toContain("GET");
  });

  it("names none for a path no route has, and keeps to a parameter's pattern", () => {
    expect(allowed("/v1/chat")).toEqual([]);
    expect(allowed("/v1/files")).toEqual([]);
    expect(allowed("/v1/files/a/b/c")).toEqual([]);
    expect(allowed("/v2/models/digits/versions/two")).toEqual([]);
    expect(allowed("/v2/models/digits/versions/2")).toEqual(["GET", "HEAD"]);
    // Hono routes a trailing slash as another path: no route has it
    expect(allowed("/v1/chat/completions/")).toEqual([]);
    expect(allowed("/v1/files/file-1/")).toEqual([]);
  });
});
