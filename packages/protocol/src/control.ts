import { z } from "zod";
import { WIRE_VERSION } from "./wire.js";

/**
 * The control channel: broadcasts every API replica and every worker hears. `traffic` and
 * `generation` say a model's shared serving config changed (replicas drop what they cached);
 * `reload` asks each worker to reload a model and answer on `reply`; with `prepare`, each
 * loads what changed and holds it until the `reload-decision` for that `reply` says to swap
 * it in (every worker loaded it) or to drop it (one did not): no worker serves new files that
 * another refused. A worker that predates `prepare` swaps at once, as it always did.
 */
export const controlMessageSchema = z.discriminatedUnion("type", [
  z.object({ v: z.literal(WIRE_VERSION), type: z.literal("traffic"), model: z.string() }),
  z.object({ v: z.literal(WIRE_VERSION), type: z.literal("generation"), model: z.string() }),
  z.object({
    v: z.literal(WIRE_VERSION),
    type: z.literal("reload"),
    model: z.string(),
    /** Channel each worker answers on, with its ReloadOutcome. */
    reply: z.string(),
    prepare: z.boolean().optional(),
  }),
  z.object({
    v: z.literal(WIRE_VERSION),
    type: z.literal("reload-decision"),
    model: z.string(),
    /** The `reply` of the reload decided. */
    reply: z.string(),
    commit: z.boolean(),
  }),
]);
export type ControlMessage = z.infer<typeof controlMessageSchema>;

/** One worker's answer to a reload: what it loaded, left as it was, or refused. */
export const reloadOutcomeSchema = z.object({
  worker: z.string(),
  model: z.string(),
  loaded: z.array(z.string()),
  unchanged: z.array(z.string()),
  failed: z.array(z.object({ version: z.string(), error: z.string() })),
  /** What loaded is held for the decision, which this worker answers once it swapped. */
  held: z.boolean().optional(),
});
export type ReloadOutcome = z.infer<typeof reloadOutcomeSchema>;

/** A worker's answer to a committed reload it held: swapped in, serving from now on. */
export const reloadSwappedSchema = z.object({ worker: z.string(), swapped: z.literal(true) });
export type ReloadSwapped = z.infer<typeof reloadSwappedSchema>;

/** Broadcast to every worker: stop work on this job (BullMQ's own cancel is worker-local). */
export const cancelMessageSchema = z.object({ v: z.literal(WIRE_VERSION), job: z.string() });
export type CancelMessage = z.infer<typeof cancelMessageSchema>;

/** Parses a control message; undefined for anything else (another version, not ours). */
export function parseControlMessage(raw: string): ControlMessage | undefined {
  try {
    const parsed = controlMessageSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
