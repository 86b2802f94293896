import type { Worker } from "node:worker_threads";
import {
  cacheBuffers,
  type LmReply,
  type LmRequest,
  type LmShape,
  type SeqCache,
  type StepRow,
} from "./lm-messages.js";
import { spawnThread } from "./spawn-thread.js";
import type { SessionOptions } from "./tensor.js";

export interface LmRuntimeOptions {
  /**
   * Run prompts on a thread (and session) of their own, so that a joining sequence's prefill
   * does not wait for the decode step in flight, nor the decode step for it; each prefilled
   * cache is then handed to the decode thread. @defaultValue false
   */
  prefillThread?: boolean;
}

/** One LM thread and the requests it has not answered yet. */
class LmThread {
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (reply: LmReply) => void; reject: (e: Error) => void }
  >();

  private constructor(private readonly thread: Worker) {
    thread.on("message", (msg: LmReply) => {
      if (msg.type !== "logits" && msg.type !== "prefilled" && msg.type !== "error") return;
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.type === "error") p?.reject(new Error(msg.message));
      else p?.resolve(msg);
    });
    thread.on("exit", (code) => {
      for (const p of this.pending.values())
        p.reject(new Error(`lm thread exited with code ${code}`));
      this.pending.clear();
    });
  }

  static async start(path: string, shape: LmShape, options: SessionOptions): Promise<LmThread> {
    const thread = spawnThread("lm-thread", { path, options, shape });
    await new Promise<void>((resolve, reject) => {
      thread.once("message", (msg: LmReply) => {
        if (msg.type === "ready") resolve();
        else {
          void thread.terminate();
          reject(
            new Error(
              msg.type === "load-error" ? msg.message : "unexpected message from lm thread",
            ),
          );
        }
      });
      thread.once("error", reject);
    });
    return new LmThread(thread);
  }

  request(type: "step" | "prefill", rows: StepRow[]): Promise<LmReply> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.postMessage({ type, id, rows } satisfies LmRequest);
    });
  }

  send(msg: LmRequest, transfer: ArrayBuffer[] = []): void {
    this.thread.postMessage(msg, transfer);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.thread.once("exit", () => resolve());
      this.send({ type: "close" });
      setTimeout(() => void this.thread.terminate(), 5_000).unref();
    });
  }
}

/**
 * A decoder LM with a KV cache in Hugging Face Optimum's naming, loaded on a worker thread
 * that also keeps every sequence's cache. `step` appends tokens to sequences and returns the
 * logits of each one's last position; `prefill` does the same for fresh prompts, on a thread
 * of its own when asked to.
 *
 * @example
 * const lm = await LmRuntime.load("models/tiny-lm/1/model.onnx", { layers: 4, heads: 4, headDim: 32, vocab: 257 }, opts);
 * const [logits] = await lm.step([{ seq: 1, tokens: [72, 105] }]);
 */
export class LmRuntime {
  private constructor(
    private readonly decoder: LmThread,
    private readonly prefiller: LmThread | undefined,
    private readonly vocab: number,
  ) {}

  static async load(
    path: string,
    shape: LmShape,
    options: SessionOptions,
    runtime: LmRuntimeOptions = {},
  ): Promise<LmRuntime> {
    const [decoder, prefiller] = await Promise.all([
      LmThread.start(path, shape, options),
      runtime.prefillThread ? LmThread.start(path, shape, options) : undefined,
    ]);
    return new LmRuntime(decoder, prefiller, shape.vocab);
  }

  async step(rows: StepRow[]): Promise<Float32Array[]> {
    return this.split(await this.decoder.request("step", rows));
  }

  /**
   * Runs sequences' first tokens (prompts, or prompts and resumed tokens). On the prefill
   * thread (when there is one and `onPrefillThread`), the caches move to the decode thread
   * before this resolves, so a `step` sent after it finds them there. An idle decode thread
   * answers sooner than the prefill thread, whose first work after a pause pays for waking it.
   */
  async prefill(rows: StepRow[], onPrefillThread = true): Promise<Float32Array[]> {
    if (!this.prefiller || !onPrefillThread) return this.step(rows);
    const reply = await this.prefiller.request("prefill", rows);
    if (reply.type === "prefilled") this.adopt(reply.caches);
    return this.split(reply);
  }

  /** Frees the caches of sequences that finished or left. */
  release(seqs: number[]): void {
    if (seqs.length === 0) return;
    this.decoder.send({ type: "release", seqs });
    this.prefiller?.send({ type: "release", seqs });
  }

  async close(): Promise<void> {
    await Promise.all([this.decoder.close(), this.prefiller?.close()]);
  }

  private adopt(caches: SeqCache[]): void {
    this.decoder.send({ type: "adopt", caches }, cacheBuffers(caches));
  }

  private split(reply: LmReply): Float32Array[] {
    if (reply.type !== "logits" && reply.type !== "prefilled") return [];
    const { logits } = reply;
    const vocab = this.vocab;
    const rows = logits.length / vocab;
    return Array.from({ length: rows }, (_, i) => logits.subarray(i * vocab, (i + 1) * vocab));
  }
}
