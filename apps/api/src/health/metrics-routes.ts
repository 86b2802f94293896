import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { HonoEnv } from "../services.js";

const route = createRoute({
  method: "get",
  path: "/metrics",
  summary: "Prometheus metrics",
  responses: {
    200: {
      content: { "text/plain": { schema: z.string() } },
      description: "Prometheus text format",
    },
  },
});

export function registerMetrics(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) => {
    const { metrics } = c.get("services");
    return c.text(await metrics.render(), 200, { "Content-Type": metrics.registry.contentType });
  });
}
