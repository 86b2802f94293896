import type { GraphSignature } from "./graph-signature.js";
import {
  cacheBuffers,
  type KeptPrompt,
  type LmReply,
  type LmRequest,
  type LmShape,
  type PromptScores,
  type SeqCache,
  type StepRow,
} from "./lm-messages.js";
import type { SessionOptions } from "./tensor.js";
import { ThreadClient } from "./thread-client.js";

export interface LmRuntimeOptions {
  /**
   * Run prompts on a thread (and session) of their own, so that a joining sequence's prefill
   * does not wait for the decode step in flight, nor the decode step for it; each prefilled
   * cache is then handed to the decode thread. @defaultValue false
   */
  prefillThread?: boolean;
  /**
   * Bytes of prompts' KV caches each LM thread keeps for prompts that begin the same way
   * (`PrefixCache`); 0 turns prefix caching off. @defaultValue 0
   */
  prefixCacheBytes?: number;
  /**
   * With a prefill thread, how often at most each LM thread hands the other what it kept
   * lately (a copy), in ms. @defaultValue 100
   */
  prefixShareMs?: number;
}

/** What a step answers: each row's last-position logits, and the prompt scores asked for. */
export interface LmOutput {
  logits: Float32Array[];
  prompts: PromptScores[];
  /** Per row: its first tokens read from the prefix cache rather than computed. */
  cached: number[];
}

/** The calling side of one LM thread (lm-thread.ts): the decode thread or the prefill thread. */
type LmThreadClient = ThreadClient<LmRequest, LmReply>;

function startLmThread(
  path: string,
  shape: LmShape,
  options: SessionOptions,
  prefixCacheBytes: number,
  sharesPrefixes: boolean,
  shareEveryMs: number,
) {
  return ThreadClient.start<LmRequest, LmReply>("lm-thread", {
    path,
    options,
    shape,
    prefixCacheBytes,
    sharesPrefixes,
    shareEveryMs,
  });
}

/**
 * A decoder LM with a KV cache in Hugging Face Optimum's naming, loaded on a worker thread
 * that also keeps every sequence's cache. `step` appends tokens to sequences and returns the
 * logits of each one's last position; `prefill` does the same for fresh prompts, on a thread
 * of its own when asked to.
 *
 * @example
 * const lm = await LmRuntime.load("models/tiny-lm/1/model.onnx", { layers: 4, kvHeads: 4, headDim: 32, vocab: 257 }, opts);
 * const [logits] = await lm.step([{ seq: 1, tokens: [72, 105] }]);
 */
export class LmRuntime {
  private constructor(
    /** The graph's inputs and outputs: what the model's model.json is checked against. */
    readonly graph: GraphSignature,
    private readonly decoder: LmThreadClient,
    private readonly prefiller: LmThreadClient | undefined,
    private readonly vocab: number,
    private readonly prefixCaching: boolean,
  ) {}

  static async load(
    path: string,
    shape: LmShape,
    options: SessionOptions,
    runtime: LmRuntimeOptions = {},
  ): Promise<LmRuntime> {
    const bytes = runtime.prefixCacheBytes ?? 0;
    // two threads prefill: what one keeps in its prefix cache, the other keeps too
    const shares = bytes > 0 && runtime.prefillThread === true;
    const every = runtime.prefixShareMs ?? 100;
    const [decoder, prefiller] = await Promise.all([
      startLmThread(path, shape, options, bytes, shares, every),
      runtime.prefillThread ? startLmThread(path, shape, options, bytes, shares, every) : undefined,
    ]);
    return new LmRuntime(
      decoder.ready.graph,
      decoder.client,
      prefiller?.client,
      shape.vocab,
      bytes > 0,
    );
  }

  async step(rows: StepRow[]): Promise<Float32Array[]> {
    return (await this.stepScored(rows)).logits;
  }

  /** `step`, with the prompt scores of rows that ask for them (`StepRow.scorePrompt`). */
  async stepScored(rows: StepRow[]): Promise<LmOutput> {
    const reply = await this.decoder.request((id) => ({ type: "step", id, rows }));
    if (reply.type === "logits") this.share(reply.kept, this.prefiller);
    return this.output(reply);
  }

  /**
   * Runs sequences' first tokens (prompts, or prompts and resumed tokens). On the prefill
   * thread (when there is one and `onPrefillThread`), the caches move to the decode thread
   * before this resolves, so a `step` sent after it finds them there. An idle decode thread
   * answers sooner than the prefill thread, whose first work after a pause pays for waking it.
   */
  async prefill(rows: StepRow[], onPrefillThread = true): Promise<Float32Array[]> {
    return (await this.prefillScored(rows, onPrefillThread)).logits;
  }

  /** `prefill`, with the prompt scores of rows that ask for them (`StepRow.scorePrompt`). */
  async prefillScored(rows: StepRow[], onPrefillThread = true): Promise<LmOutput> {
    if (!this.prefiller || !onPrefillThread) return this.stepScored(rows);
    const reply = await this.prefiller.request((id) => ({ type: "prefill", id, rows }));
    if (reply.type === "prefilled") {
      this.adopt(reply.caches);
      this.share(reply.kept, this.decoder);
    }
    return this.output(reply);
  }

  /**
   * Keeps a finished sequence's cache in the prefix cache (`tokens`: its prompt and completion;
   * as many as its cache holds count); call before `release` (not waiting: the thread takes
   * requests in order). Resolves once kept (the other thread gets it with the next share).
   * Nothing when prefix caching is off.
   */
  retain(seq: number, tokens: number[]): Promise<void> {
    if (!this.prefixCaching) return Promise.resolve();
    return this.decoder
      .request((id) => ({ type: "retain", id, seq, tokens }))
      .then(
        (reply) => {
          if (reply.type === "retained") this.share(reply.kept, this.prefiller);
        },
        () => undefined, // a cache not kept is only a cache not kept
      );
  }

  /** Frees the caches of sequences that finished or left. */
  release(seqs: number[]): void {
    if (seqs.length === 0) return;
    this.decoder.send({ type: "release", seqs });
    this.prefiller?.send({ type: "release", seqs });
  }

  async close(): Promise<void> {
    await Promise.all([
      this.decoder.close({ type: "close" }),
      this.prefiller?.close({ type: "close" }),
    ]);
  }

  /** Prompts one thread kept in its prefix cache, handed to the other. */
  private share(kept: KeptPrompt[], to: LmThreadClient | undefined): void {
    if (kept.length > 0) to?.send({ type: "keep", prompts: kept }, cacheBuffers(kept));
  }

  private adopt(caches: SeqCache[]): void {
    this.decoder.send({ type: "adopt", caches }, cacheBuffers(caches));
  }

  private output(reply: LmReply): LmOutput {
    if (reply.type !== "logits" && reply.type !== "prefilled")
      return { logits: [], prompts: [], cached: [] };
    const { logits } = reply;
    const vocab = this.vocab;
    const rows = logits.length / vocab;
    return {
      logits: Array.from({ length: rows }, (_, i) => logits.subarray(i * vocab, (i + 1) * vocab)),
      prompts: reply.prompts,
      cached: reply.cached,
    };
  }
}
