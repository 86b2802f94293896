import { MAX_TIMEOUT_MS, prioritySchema, timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import { unsupported } from "../http/schemas.js";

/** Most outputs a request may name: more than any model here has. */
export const MAX_OUTPUTS = 64;

/** How deep v2 `data` may nest: a tensor has a handful of axes, never thousands. */
export const MAX_DATA_DEPTH = 32;

/**
 * KServe v2 data may be flat or nested row-major; every leaf must be a finite number, or a
 * string in a BYTES tensor (texts, as an embedder takes). Walked with an explicit stack, so
 * that hostile nesting is a 400, not a stack overflow.
 */
const nestedValues = z
  .array(z.unknown())
  .openapi({ description: "Tensor values, flat or nested row-major", example: [0, 1, 2] });

function firstBadLeaf(data: unknown[], strings: boolean): string | undefined {
  const stack: Array<{ values: unknown[]; depth: number }> = [{ values: data, depth: 1 }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    for (const v of top.values) {
      if (Array.isArray(v)) {
        if (top.depth >= MAX_DATA_DEPTH)
          return `data is nested deeper than ${MAX_DATA_DEPTH} levels`;
        stack.push({ values: v, depth: top.depth + 1 });
      } else if (
        !(strings && typeof v === "string") &&
        (typeof v !== "number" || !Number.isFinite(v))
      ) {
        return `data holds ${JSON.stringify(v)?.slice(0, 40)}, not a finite number${strings ? " or a string" : ""}`;
      }
    }
  }
  return undefined;
}

export const v2InputSchema = z
  .object({
    name: z.string(),
    shape: z.array(z.number().int().nonnegative()),
    datatype: z.string(),
    data: nestedValues,
    parameters: z.record(z.string(), z.unknown()).optional(),
  })
  .superRefine((input, ctx) => {
    const bad = firstBadLeaf(input.data, input.datatype === "BYTES");
    if (bad !== undefined) ctx.addIssue({ code: "custom", message: bad, path: ["data"] });
  });

export const v2InferRequestSchema = z
  .object({
    id: z.string().optional(),
    inputs: z.array(v2InputSchema).min(1),
    // a model has a few outputs, each asked for once (the codec refuses one twice)
    outputs: z
      .array(
        z.object({ name: z.string(), parameters: z.record(z.string(), z.unknown()).optional() }),
      )
      .max(MAX_OUTPUTS)
      .optional(),
    parameters: z
      .object({
        timeout_ms: timeoutMsSchema.optional(),
        /** Triton's (tritonclient's `timeout=`): the deadline in microseconds, 0 none; `timeout_ms` wins. */
        timeout: z
          .number()
          .int()
          .nonnegative()
          .max(MAX_TIMEOUT_MS * 1000)
          .optional(),
        priority: prioritySchema.optional(),
        // Triton's sequence batching: no model here keeps state from one request to the next,
        // so a request that names a sequence is refused, as Triton refuses one to such a model
        sequence_id: unsupported("sequence_id", 0, ""),
        sequence_start: unsupported("sequence_start", false),
        sequence_end: unsupported("sequence_end", false),
      })
      .catchall(z.unknown())
      .optional(),
  })
  .openapi("InferenceRequest");
export type V2InferParameters = NonNullable<z.infer<typeof v2InferRequestSchema>["parameters"]>;

/** A v2 request's deadline and priority, Triton's microseconds read as milliseconds. */
export function v2CallBody(parameters: V2InferParameters | undefined) {
  const { timeout_ms, timeout, priority } = parameters ?? {};
  return {
    priority,
    timeout_ms: timeout_ms ?? (timeout ? Math.ceil(timeout / 1000) : undefined),
  };
}
export type V2InferRequest = z.infer<typeof v2InferRequestSchema>;

export const v2OutputSchema = z.object({
  name: z.string(),
  shape: z.array(z.number().int()),
  datatype: z.string(),
  /** Numbers, or a classification's "value:index:label" strings; absent when sent as binary. */
  data: z.union([z.array(z.number()), z.array(z.string())]).optional(),
  /** Triton's binary extension: `binary_data_size`, the output's bytes after the JSON. */
  parameters: z.object({ binary_data_size: z.number().int() }).optional(),
});

export const v2InferResponseSchema = z
  .object({
    model_name: z.string(),
    model_version: z.string(),
    id: z.string(),
    outputs: z.array(v2OutputSchema),
  })
  .openapi("InferenceResponse");
export type V2InferResponse = z.infer<typeof v2InferResponseSchema>;

const tensorMetadata = z.object({
  name: z.string(),
  datatype: z.string(),
  shape: z.array(z.number().int()),
});
export const v2ModelMetadataSchema = z
  .object({
    name: z.string(),
    versions: z.array(z.string()),
    platform: z.string(),
    inputs: z.array(tensorMetadata),
    outputs: z.array(tensorMetadata),
  })
  .openapi("ModelMetadata");
