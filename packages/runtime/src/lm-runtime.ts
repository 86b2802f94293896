import type { Worker } from "node:worker_threads";
import type { LmReply, LmRequest, LmShape, StepRow } from "./lm-messages.js";
import { spawnThread } from "./spawn-thread.js";
import type { SessionOptions } from "./tensor.js";

/**
 * A decoder LM with a KV cache in Hugging Face Optimum's naming, loaded on a worker thread
 * that also keeps every sequence's cache. `step` appends tokens to sequences and returns the
 * logits of each one's last position.
 *
 * @example
 * const lm = await LmRuntime.load("models/tiny-lm/1/model.onnx", { layers: 4, heads: 4, headDim: 32, vocab: 257 }, opts);
 * const [logits] = await lm.step([{ seq: 1, tokens: [72, 105] }]);
 */
export class LmRuntime {
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (l: Float32Array[]) => void; reject: (e: Error) => void }
  >();

  private constructor(
    private readonly thread: Worker,
    private readonly vocab: number,
  ) {
    thread.on("message", (msg: LmReply) => {
      if (msg.type !== "logits" && msg.type !== "error") return;
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.type === "logits") {
        const vocab = this.vocab;
        const rows = msg.logits.length / vocab;
        p?.resolve(
          Array.from({ length: rows }, (_, i) => msg.logits.subarray(i * vocab, (i + 1) * vocab)),
        );
      } else p?.reject(new Error(msg.message));
    });
    thread.on("exit", (code) => {
      for (const p of this.pending.values())
        p.reject(new Error(`lm thread exited with code ${code}`));
      this.pending.clear();
    });
  }

  static async load(path: string, shape: LmShape, options: SessionOptions): Promise<LmRuntime> {
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
    return new LmRuntime(thread, shape.vocab);
  }

  step(rows: StepRow[]): Promise<Float32Array[]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.postMessage({ type: "step", id, rows } satisfies LmRequest);
    });
  }

  /** Frees the caches of sequences that finished or left. */
  release(seqs: number[]): void {
    if (seqs.length > 0) this.thread.postMessage({ type: "release", seqs } satisfies LmRequest);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.thread.once("exit", () => resolve());
      this.thread.postMessage({ type: "close" } satisfies LmRequest);
      setTimeout(() => void this.thread.terminate(), 5_000).unref();
    });
  }
}
