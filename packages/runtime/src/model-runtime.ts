import type { Worker } from "node:worker_threads";
import { spawnThread } from "./spawn-thread.js";
import type { SessionOptions, TensorMap } from "./tensor.js";
import type { ThreadReply, ThreadRequest } from "./thread-messages.js";

export interface ModelRuntimeOptions extends SessionOptions {
  /** Sessions that run side by side, each on its own thread (Triton's instance count). */
  instances: number;
}

interface Pending {
  resolve: (outputs: TensorMap) => void;
  reject: (err: Error) => void;
}

interface Instance {
  thread: Worker;
  busy: boolean;
  pending: Map<number, Pending>;
}

/**
 * One model version loaded into `instances` ONNX Runtime sessions, each on a worker thread.
 * `run` hands a batch to an idle instance, or queues it until one is free.
 *
 * @example
 * const rt = await ModelRuntime.load("models/digits/2/model.onnx", { instances: 2, intraOpThreads: 1, executionProvider: "cpu" });
 * const { logits } = await rt.run({ input: { data: new Float32Array(64), dims: [1, 64] } });
 */
export class ModelRuntime {
  private nextId = 0;
  private readonly backlog: Array<{ feeds: TensorMap } & Pending> = [];
  private closed = false;

  private constructor(
    private readonly instances: Instance[],
    readonly inputNames: readonly string[],
    readonly outputNames: readonly string[],
  ) {}

  /** Loads every instance; rejects (and stops the threads) when the file does not load. */
  static async load(path: string, options: ModelRuntimeOptions): Promise<ModelRuntime> {
    const started = await Promise.allSettled(
      Array.from({ length: options.instances }, () => startThread(path, options)),
    );
    const failed = started.find((s) => s.status === "rejected");
    if (failed) {
      for (const s of started) if (s.status === "fulfilled") void s.value.thread.terminate();
      throw (failed as PromiseRejectedResult).reason;
    }
    const ready = (started as PromiseFulfilledResult<StartedThread>[]).map((s) => s.value);
    const first = ready[0];
    if (!first) throw new Error("ModelRuntime needs at least one instance");
    const instances = ready.map((r) => ({ thread: r.thread, busy: false, pending: new Map() }));
    const runtime = new ModelRuntime(instances, first.inputNames, first.outputNames);
    for (const inst of instances) runtime.attach(inst);
    return runtime;
  }

  run(feeds: TensorMap): Promise<TensorMap> {
    if (this.closed) return Promise.reject(new Error("model runtime is closed"));
    return new Promise((resolve, reject) => {
      this.backlog.push({ feeds, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiting of this.backlog.splice(0))
      waiting.reject(new Error("model runtime is closed"));
    await Promise.all(
      this.instances.map(
        (inst) =>
          new Promise<void>((resolve) => {
            inst.thread.once("exit", () => resolve());
            inst.thread.postMessage({ type: "close" } satisfies ThreadRequest);
            // A thread stuck in a long run must not hold shutdown hostage.
            setTimeout(() => void inst.thread.terminate(), 5_000).unref();
          }),
      ),
    );
  }

  private dispatch(): void {
    for (const inst of this.instances) {
      if (inst.busy) continue;
      const job = this.backlog.shift();
      if (!job) return;
      const id = this.nextId++;
      inst.busy = true;
      inst.pending.set(id, job);
      const transfer = Object.values(job.feeds).map((t) => t.data.buffer as ArrayBuffer);
      inst.thread.postMessage(
        { type: "run", id, feeds: job.feeds } satisfies ThreadRequest,
        transfer,
      );
    }
  }

  private attach(inst: Instance): void {
    inst.thread.on("message", (msg: ThreadReply) => {
      if (msg.type !== "result" && msg.type !== "error") return;
      const pending = inst.pending.get(msg.id);
      inst.pending.delete(msg.id);
      inst.busy = false;
      if (msg.type === "result") pending?.resolve(msg.outputs);
      else pending?.reject(new Error(msg.message));
      this.dispatch();
    });
    inst.thread.on("exit", (code) => {
      const err = new Error(`inference thread exited with code ${code}`);
      for (const p of inst.pending.values()) p.reject(err);
      inst.pending.clear();
      inst.busy = true; // never dispatch to a dead thread
    });
  }
}

interface StartedThread {
  thread: Worker;
  inputNames: string[];
  outputNames: string[];
}

function startThread(path: string, options: SessionOptions): Promise<StartedThread> {
  const thread = spawnThread("session-thread", { path, options });
  return new Promise((resolve, reject) => {
    const onMessage = (msg: ThreadReply) => {
      thread.off("error", onError);
      thread.off("message", onMessage);
      if (msg.type === "ready")
        resolve({ thread, inputNames: msg.inputNames, outputNames: msg.outputNames });
      else {
        void thread.terminate();
        reject(
          new Error(msg.type === "load-error" ? msg.message : "unexpected message from thread"),
        );
      }
    };
    const onError = (err: Error) => reject(err);
    thread.on("message", onMessage);
    thread.once("error", onError);
  });
}
