import type { z } from "@hono/zod-openapi";

/**
 * vLLM's rule, and OpenAI's ("only set this when you set stream: true"): `stream_options` say
 * how a stream streams, so they come with one, on every route that has them.
 */
export function streamOptionsStreamed(
  body: { stream?: boolean | null | undefined; stream_options?: unknown },
  ctx: z.RefinementCtx,
): void {
  // as vLLM reads them, by Python's truth: `{}` says nothing, any field something
  const options = body.stream_options as Record<string, unknown> | null | undefined;
  const said = options != null && Object.keys(options).length > 0;
  if (said && body.stream !== true)
    ctx.addIssue({
      code: "custom",
      path: ["stream_options"],
      message: "Stream options can only be defined when `stream=True`.",
    });
}
