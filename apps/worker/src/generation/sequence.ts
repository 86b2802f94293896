import type { CompletionResult, FinishReason, JobEventBody, SamplingParams } from "@ferry/protocol";
import type { StepRow } from "@ferry/runtime";
import type { OutputProcessor } from "./output-processor.js";

/** One completion as the engine tracks it, from admission to its last token. */
export interface Sequence {
  id: number;
  promptIds: number[];
  params: SamplingParams;
  /** Epoch ms after which it must not start. */
  deadline: number;
  signal: AbortSignal;
  random: () => number;
  decoder: { push(id: number): string; flush(): string };
  output: OutputProcessor;
  /** Completion token ids so far. */
  generated: number[];
  /** Ids sampled since the last token event went out (they travel with the next one). */
  unsent: number[];
  /** The token sampled last step, fed to the model this step. */
  pending: number | undefined;
  enqueuedAt: number;
  startedAt: number | undefined;
  lastTokenAt: number | undefined;
  ttftMs: number | undefined;
  emit: (events: JobEventBody[]) => void;
  resolve: (result: CompletionResult) => void;
  reject: (err: Error) => void;
}

export type { FinishReason };

/** What a joining sequence prefills: its prompt, and any completion it resumes. */
export function prefillIds(seq: Sequence): number[] {
  return seq.generated.length === 0 ? seq.promptIds : [...seq.promptIds, ...seq.generated];
}

/** A joining sequence's row of a prefill pass. */
export function prefillStepRow(seq: Sequence): StepRow {
  return { seq: seq.id, tokens: prefillIds(seq) };
}

/** A running sequence's row of a decode step: the token it sampled last. */
export function decodeStepRow(seq: Sequence): StepRow {
  return { seq: seq.id, tokens: [seq.pending ?? 0] };
}
