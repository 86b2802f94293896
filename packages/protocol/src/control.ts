import { z } from "zod";
import { WIRE_VERSION } from "./wire.js";

/**
 * The control channel: broadcasts every API replica and every worker hears. `traffic` and
 * `generation` say a model's shared serving config changed (replicas drop what they cached);
 * `reload` asks each worker to reload a model and answer on `reply`.
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
});
export type ReloadOutcome = z.infer<typeof reloadOutcomeSchema>;

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
