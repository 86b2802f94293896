import { FerryError } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { openAiErrors } from "../http/openapi.js";
import { sse, tieResumable } from "../http/sse.js";
import type { HonoEnv } from "../services.js";

/** A Redis Stream id, the only thing Last-Event-ID may hold: `<ms>-<seq>`. */
const STREAM_ID = /^[0-9]{1,15}-[0-9]{1,15}$/;

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
    400: openAiErrors[400],
    404: openAiErrors[404],
    429: openAiErrors[429],
    503: openAiErrors[503],
  },
});

export function registerJobEvents(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) => {
    const { id } = c.req.valid("param");
    const { jobs, streams, drainSignal } = c.get("services");
    const after = c.req.header("Last-Event-ID") || undefined;
    if (after !== undefined && !STREAM_ID.test(after))
      throw new FerryError(
        "INVALID_INPUT",
        "Last-Event-ID must be an event id this stream sent (<ms>-<seq>)",
      );
    const slot = streams.acquire(c.get("tenant"));
    const reading = new AbortController();
    let events: Awaited<ReturnType<typeof jobs.events>>;
    try {
      events = await jobs.events(id, c.get("tenant"), after, reading.signal);
    } catch (err) {
      slot.release();
      throw err;
    }
    return sse(c, async (stream) => {
      // a draining replica ends the stream: the client reconnects (through the Service, to
      // another replica) with Last-Event-ID
      const untie = tieResumable(stream, drainSignal, reading);
      try {
        for await (const event of events) {
          await stream.send({
            id: event.id,
            event: event.body.type,
            data: JSON.stringify(event.body),
          });
        }
        if (drainSignal.aborted) await stream.raw("retry: 250\n\n");
      } finally {
        untie();
        slot.release();
      }
    });
  });
}
