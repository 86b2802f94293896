import { z } from "zod";
import { embeddingConfigSchema } from "./embedder-config.js";
import { timeoutMsSchema } from "./jobs.js";

/** Tensor element types, named as KServe's Open Inference Protocol names them. */
export const datatypeSchema = z.enum(["FP32", "FP64", "INT64", "INT32", "BOOL", "BYTES"]);
export type Datatype = z.infer<typeof datatypeSchema>;

export const tensorSpecSchema = z.object({
  name: z.string().min(1),
  datatype: datatypeSchema,
  /** Per-row shape, batch axis excluded (Triton's `dims`); -1 marks a variable axis. */
  dims: z.array(z.number().int()),
});
export type TensorSpec = z.infer<typeof tensorSpecSchema>;

export const dynamicBatchingSchema = z.object({
  /** Batch sizes that flush at once, without waiting for the queue delay. */
  preferred_batch_sizes: z.array(z.number().int().positive()).default([]),
  /** How long the oldest request may wait for others to join its batch, in ms. */
  max_queue_delay_ms: z.number().nonnegative().default(2),
});

export const cacheConfigSchema = z.object({
  enabled: z.boolean().default(false),
  ttl_s: z.number().int().positive().default(3600),
  max_entries: z.number().int().positive().default(100_000),
});

/** A model's name, which is also its directory's: no separator, no leading dot. */
export const MODEL_NAME = /^[a-z0-9][a-z0-9._-]*$/;

/** models/<name>/model.json: the Triton config.pbtxt of a Ferry model, as JSON. */
export const modelConfigSchema = z
  .object({
    name: z.string().regex(MODEL_NAME, "lowercase letters, digits, . _ -"),
    kind: z.enum(["classifier", "generator", "embedder"]),
    platform: z.literal("onnxruntime_onnx").default("onnxruntime_onnx"),
    description: z.string().default(""),
    inputs: z.array(tensorSpecSchema).min(1),
    outputs: z.array(tensorSpecSchema).min(1),
    max_batch_size: z.number().int().positive().default(32),
    dynamic_batching: dynamicBatchingSchema.default({
      preferred_batch_sizes: [],
      max_queue_delay_ms: 2,
    }),
    /** Sessions of one version that run batches side by side (Triton's instance_group count). */
    instance_count: z.number().int().positive().default(1),
    /**
     * Runs batches on the worker's event loop instead of an instance thread (one instance).
     * For a model whose batch computes in a few milliseconds or less, the hand-off to a thread
     * and back (two wake-ups) costs more than the model; the loop is blocked one batch at a
     * time, far inside any lock or probe timeout.
     */
    inline: z.boolean().default(false),
    /** ONNX Runtime intra-op threads per session. */
    intra_op_threads: z.number().int().positive().default(1),
    /** Requests waiting in the queue past which new ones get 429. */
    max_queue_size: z.number().int().positive().default(1000),
    /** Deadline applied when a request names none, in ms. */
    default_timeout_ms: timeoutMsSchema.default(30_000),
    labels: z.array(z.string()).optional(),
    versions: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
    stable_version: z.string().optional(),
    cache: cacheConfigSchema.optional(),
    /**
     * When the model fails on a worker (MODEL_ERROR: the run itself failed): answer with the last
     * stored answer for the input, else `default_prediction`, else 503. Never for a model that is
     * still starting or scaled to zero (the request waits in the queue until its deadline, 504),
     * for Redis being down (503), a passed deadline (504), a full queue (429) or bad input (400).
     */
    fallback: z
      .object({
        enabled: z.boolean().default(false),
        default_prediction: z.number().int().optional(),
        /** How long a last answer stays available to fallbacks, in seconds. */
        keep_s: z.number().int().positive().default(86_400),
      })
      .optional(),
    tokenizer: z.record(z.string(), z.unknown()).optional(),
    /** A generator's chat template (Jinja, Hugging Face's `chat_template` convention). */
    chat_template: z.string().optional(),
    /**
     * How the model writes a tool call in its text, for chats that let it choose between text
     * and a call (`tool_choice: "auto"`), as vLLM's `--tool-call-parser`: `hermes` reads
     * `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes, Qwen 2.5 and others),
     * `llama3_json` an answer of `{"name": ..., "parameters": {...}}` objects (Llama 3.1-3.3).
     */
    tool_call_parser: z.enum(["hermes", "llama3_json"]).optional(),
    architecture: z.record(z.string(), z.unknown()).optional(),
    scheduler: z.record(z.string(), z.unknown()).optional(),
    /** An embedder's pooling and budgets (`embedder-config.ts`). */
    embedding: embeddingConfigSchema.optional(),
  })
  .refine((config) => !config.inline || config.instance_count === 1, {
    message: "inline runs one instance, on the event loop: instance_count must be 1",
    path: ["inline"],
  })
  .superRefine((config, ctx) => {
    if (config.kind !== "embedder") return;
    if (!config.embedding)
      ctx.addIssue({
        code: "custom",
        message: "an embedder needs its pooling and max_tokens",
        path: ["embedding"],
      });
    if (!config.tokenizer)
      ctx.addIssue({
        code: "custom",
        message: "an embedder needs its tokenizer",
        path: ["tokenizer"],
      });
    // the API checks a request's `dimensions` against model.json alone, before any worker runs
    const hidden = config.outputs[0]?.dims.at(-1) ?? -1;
    if (hidden <= 0)
      ctx.addIssue({
        code: "custom",
        message: "an embedder's output ends with its hidden width, a fixed number",
        path: ["outputs"],
      });
    const widest = Math.max(
      config.embedding?.dimensions ?? 0,
      ...(config.embedding?.matryoshka_dimensions ?? []),
    );
    if (hidden > 0 && widest > hidden)
      ctx.addIssue({
        code: "custom",
        message: `dimensions of ${widest} are wider than the hidden width ${hidden}`,
        path: ["embedding"],
      });
  });
export type ModelConfig = z.infer<typeof modelConfigSchema>;
