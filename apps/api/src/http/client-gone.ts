import type { Context } from "hono";
import type { HonoEnv } from "../services.js";

/** Aborted when the client closes its connection before the answer has been written. */
export function clientGone(c: Context<HonoEnv>): AbortSignal {
  const controller = new AbortController();
  const res = c.env?.outgoing;
  res?.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}
