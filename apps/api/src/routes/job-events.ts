import { FerryError, type JobEventBody } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../services.js";
import { sse } from "../sse.js";
import { openAiErrors } from "./responses.js";

/** Seconds between SSE comments that keep idle proxies from closing the stream. */
const HEARTBEAT_MS = 15_000;

const route = createRoute({
  method: "get",
  path: "/v1/jobs/{id}/events",
  summary:
    "A job's events as SSE (status, token, result, error, done), each with an id; Last-Event-ID resumes",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: {
      content: { "text/event-stream": { schema: z.string() } },
      description: "The event stream",
    },
    404: openAiErrors[404],
    503: openAiErrors[503],
  },
});

export function registerJobEvents(app: OpenAPIHono<AppEnv>): void {
  app.openapi(route, async (c) => {
    const { id } = c.req.valid("param");
    const { client } = c.get("services");
    if (!(await client.jobs.get(id)))
      throw new FerryError("JOB_NOT_FOUND", `Job '${id}' not found`);
    const after = c.req.header("Last-Event-ID") || undefined;
    return sse(c, async (stream) => {
      const reading = new AbortController();
      stream.onAbort(() => reading.abort());
      // This replica is draining: end the stream so that the client reconnects (through the
      // Service, to another replica) with Last-Event-ID, and misses nothing.
      const { drainSignal } = c.get("services");
      const onDrain = () => reading.abort();
      if (drainSignal.aborted) onDrain();
      drainSignal.addEventListener("abort", onDrain);
      const heartbeat = setInterval(() => void stream.raw(": keep-alive\n\n"), HEARTBEAT_MS);
      try {
        for await (const event of client.jobs.events(id, after, reading.signal)) {
          await stream.send({
            id: event.id,
            event: event.body.type,
            data: JSON.stringify(shown(event.body)),
          });
        }
        if (drainSignal.aborted) await stream.raw("retry: 250\n\n");
      } finally {
        clearInterval(heartbeat);
        drainSignal.removeEventListener("abort", onDrain);
      }
    });
  });
}

/** An event as clients see it: token ids are the workers' resume bookkeeping, not output. */
function shown(body: JobEventBody): JobEventBody {
  if (body.type !== "token") return body;
  const { ids: _ids, ...rest } = body;
  return rest;
}
