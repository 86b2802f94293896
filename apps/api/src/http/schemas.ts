import { MAX_JSON_DEPTH, nestsWithin } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";

export const v2ErrorSchema = z.object({ error: z.string() }).openapi("KServeError");
export const openAiErrorSchema = z
  .object({
    error: z.object({ message: z.string(), type: z.string(), code: z.string().nullable() }),
  })
  .openapi("Error");

/** A field Ferry does not implement: absent, null or its no-op value, else a 400 naming it. */
export function unsupported(field: string, ...noop: unknown[]) {
  return z
    .unknown()
    .optional()
    .superRefine((value, ctx) => {
      if (value === undefined || value === null) return;
      // structured no-ops (response_format {type: "text"}, modalities ["text"]) by value; a
      // value nested past any no-op's depth is none, and is not written out (5,000 levels
      // overflowed JSON.stringify's stack: a 500)
      const json = nestsWithin(value, 4) ? JSON.stringify(value) : undefined;
      if (json !== undefined && noop.some((n) => JSON.stringify(n) === json)) return;
      ctx.addIssue({ code: "custom", message: `${field} is not supported by this server` });
    });
}

/**
 * OpenAI's `metadata`: 16 pairs at most, keys of 64 characters, values of 512. A stored
 * response or batch keeps it (and a streamed response repeats it in three events): 7,000
 * pairs of 1 KB were 22 MB of Redis for a day from one request.
 */
export const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, "metadata holds at most 16 pairs");

/** An identifier a caller tags its requests with (`user`, `safety_identifier`...): kept, not read. */
export const callerTagSchema = z.string().max(256);

/**
 * An identifier inside a conversation (a call's id, a message's `name`): a template may write
 * it, and a stored conversation keeps it in every response that continues it.
 */
export const conversationIdSchema = z.string().max(256);

/** A function tool's description: what the model reads of it (and a stored response keeps). */
export const toolDescriptionSchema = z.string().max(8_192);

/** The tools of one request, as JSON: 128 tools' worth of ordinary schemas, not megabytes. */
export const MAX_TOOLS_JSON = 256 * 1024;

/**
 * A caller's own name for a thing (a part's `type`, an unknown field), as an error repeats
 * it: its first 64 characters (a 7 MB `type` had made a 7 MB 400).
 */
export function named(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/** Most elements a list of token ids (or of a prompt's or an input's parts) may hold. */
export const MAX_LIST_LENGTH = 262_144;

/**
 * `schema`, behind a cap on a list's length checked before any element is read: a schema
 * reads every element first (3.9 million token ids, 7.8 MB, held the API's loop 1.8 s in a
 * union that tried them as strings), and a list past the cap is refused at once.
 */
export function capped<T extends z.ZodType>(schema: T, max = MAX_LIST_LENGTH) {
  return z.preprocess((value, ctx) => {
    if (Array.isArray(value) && value.length > max) {
      ctx.addIssue({
        code: "custom",
        message: `a list of at most ${max} elements; this one has ${value.length}`,
      });
      return z.NEVER;
    }
    return value;
  }, schema);
}

/**
 * A list of token ids (integers from 0), at least `min` of them, read in one loop: zod's array
 * of numbers takes each element through checks of its own (~55 ns an id here), and 12,000 ids
 * in a 75 KB completion held the API's loop ~0.7 ms for that alone: four connections sending
 * them back to back took another key's predict p50 from 0.5 to 7.4 ms (scratch). Its length
 * is `capped`'s to bound, before this reads an element.
 */
export function tokenIdList(min = 0) {
  return z
    .custom<number[]>()
    .superRefine((value, ctx) => {
      const problem = tokenIdsProblem(value, min);
      // a bad element's issue is at its place, and one of the wrong type ends the check, as
      // zod's array reports them: a union then reports the shape a list nearly was
      // (prompt.1.1), not that it matched none of its shapes
      if (problem !== undefined) ctx.addIssue({ code: "custom", ...problem });
    })
    .openapi({
      type: "array",
      items: { type: "integer", minimum: 0 },
      ...(min > 0 ? { minItems: min } : {}),
    });
}

/**
 * An element as an error names it, never written out whole: a list 20,000 levels deep had
 * overflowed JSON.stringify's stack (a 500), and a long string or object cost its length.
 */
function described(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(named(value));
  if (Array.isArray(value)) return "a list";
  if (value !== null && typeof value === "object") return "an object";
  return String(value);
}

/** Why `value` is not a list of at least `min` token ids; undefined when it is one. */
function tokenIdsProblem(
  value: unknown,
  min: number,
): { message: string; path?: number[]; continue: boolean } | undefined {
  if (!Array.isArray(value)) return { message: "expected a list of token ids", continue: false };
  if (value.length < min)
    return { message: `a list of at least ${min} token id${min === 1 ? "" : "s"}`, continue: true };
  for (let k = 0; k < value.length; k++) {
    const id: unknown = value[k];
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0)
      return {
        message: `not a token id (an integer from 0): ${described(id)}`,
        path: [k],
        continue: typeof id === "number",
      };
  }
  return undefined;
}

/** Most content parts and tool calls a conversation's items may hold together. */
export const MAX_CONTENT_PARTS = 4_096;

/**
 * A conversation's schema (chat messages, Responses input items) behind a count of its items
 * and of their content parts and tool calls together, read before any is parsed: zod reads every element
 * first, and 300,000 empty text parts in one 7.8 MB message held the API's loop ~575 ms a
 * request to refuse (their checks and garbage), two a second within the byte rate.
 */
export function conversationWithin<T extends z.ZodType>(
  schema: T,
  { maxItems, tooMany }: { maxItems: number; tooMany: string },
) {
  return z.preprocess((value, ctx) => {
    if (!Array.isArray(value)) return value;
    if (value.length > maxItems) {
      ctx.addIssue({ code: "custom", message: tooMany });
      return z.NEVER;
    }
    let parts = 0;
    for (const item of value) {
      const { content, tool_calls } = (item ?? {}) as { content?: unknown; tool_calls?: unknown };
      if (Array.isArray(content)) parts += content.length;
      if (Array.isArray(tool_calls)) parts += tool_calls.length;
    }
    if (parts > MAX_CONTENT_PARTS) {
      ctx.addIssue({
        code: "custom",
        message: `at most ${MAX_CONTENT_PARTS} content parts and tool calls together; these have ${parts}`,
      });
      return z.NEVER;
    }
    return value;
  }, schema);
}

/** `tools` no deeper than MAX_JSON_DEPTH, and no larger than MAX_TOOLS_JSON as JSON. */
export function toolsWithin<T>(tools: readonly T[] | null | undefined): boolean {
  return !tools || (nestsWithin(tools) && JSON.stringify(tools).length <= MAX_TOOLS_JSON);
}
export const TOOLS_TOO_LARGE = `tools hold at most ${MAX_TOOLS_JSON} characters of JSON, nested at most ${MAX_JSON_DEPTH} levels`;
