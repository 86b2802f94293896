import { FerryError } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../services.js";
import { json, openAiErrors } from "./responses.js";

const outcomeSchema = z.object({
  worker: z.string(),
  loaded: z.array(z.string()),
  unchanged: z.array(z.string()),
  failed: z.array(z.object({ version: z.string(), error: z.string() })),
});

const route = createRoute({
  method: "post",
  path: "/admin/models/{name}/reload",
  summary:
    "Every worker reloads the model from the repository; requests in flight finish on the old files",
  request: { params: z.object({ name: z.string() }) },
  responses: {
    200: json(
      z.object({
        model: z.string(),
        versions: z.array(z.string()),
        workers: z.array(outcomeSchema),
      }),
      "What each worker loaded",
    ),
    ...openAiErrors,
  },
});

export function registerAdminReload(app: OpenAPIHono<AppEnv>): void {
  app.openapi(route, async (c) => {
    const { repository, client, log } = c.get("services");
    const { name } = c.req.valid("param");
    let next: typeof repository;
    try {
      next = await repository.reread();
    } catch (err) {
      throw new FerryError(
        "INVALID_INPUT",
        `Repository refused: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const entry = next.get(name);
    const workers = (await client.requestReload(name)) as Array<z.infer<typeof outcomeSchema>>;
    const failures = workers.flatMap((w) =>
      w.failed.map((f) => `${w.worker}: version ${f.version}: ${f.error}`),
    );
    log.info({ model: name, workers: workers.length, failures: failures.length }, "reload");
    if (failures.length > 0) {
      throw new FerryError(
        "INVALID_INPUT",
        `Reload of '${name}' refused; the previous files keep serving. ${failures.join("; ")}`,
      );
    }
    // Only now does this API route to what the workers accepted: a refused new version is
    // never listed, nor made the default, here.
    repository.adopt(next);
    // answers cached before now may come from the files the reload replaced
    await client.state.bumpGeneration(name);
    return c.json({ model: name, versions: entry.versions, workers }, 200);
  });
}
