import type { GraphSignature } from "./graph-signature.js";
import type { SessionOptions, TensorMap } from "./tensor.js";
import { ThreadClient } from "./thread-client.js";
import type { ThreadReply, ThreadRequest } from "./thread-messages.js";

export interface ModelRuntimeOptions extends SessionOptions {
  /** Sessions that run side by side, each on its own thread (Triton's instance count). */
  instances: number;
}

/** One batch (`run`), or several run one after another on one instance (`runMany`). */
type Work = { feeds: TensorMap } | { batches: TensorMap[] };

interface Pending {
  /** Each batch's outputs, or the error that batch alone met. */
  resolve: (outcomes: Array<TensorMap | Error>) => void;
  reject: (err: Error) => void;
}

interface Instance {
  client: ThreadClient<ThreadRequest, ThreadReply>;
  busy: boolean;
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
  private readonly backlog: Array<{ work: Work } & Pending> = [];
  private closed = false;

  private constructor(
    private readonly instances: Instance[],
    /** The graph's inputs and outputs, as its first instance read them. */
    readonly graph: GraphSignature,
  ) {}

  /** Loads every instance; rejects (and stops the threads) when the file does not load. */
  static async load(path: string, options: ModelRuntimeOptions): Promise<ModelRuntime> {
    const started = await Promise.allSettled(
      Array.from({ length: options.instances }, () =>
        ThreadClient.start<ThreadRequest, ThreadReply>("session-thread", { path, options }),
      ),
    );
    const failed = started.find((s) => s.status === "rejected");
    if (failed) {
      for (const s of started)
        if (s.status === "fulfilled") void s.value.client.close({ type: "close" });
      throw (failed as PromiseRejectedResult).reason;
    }
    const ready = (started as PromiseFulfilledResult<Started>[]).map((s) => s.value);
    const first = ready[0]?.ready;
    if (first?.type !== "ready") throw new Error("ModelRuntime needs at least one instance");
    const instances = ready.map((r) => ({ client: r.client, busy: false }));
    return new ModelRuntime(instances, first.graph);
  }

  run(feeds: TensorMap): Promise<TensorMap> {
    return this.queue({ feeds }).then((outcome) => (outcome as [TensorMap])[0]);
  }

  /**
   * Several batches on one instance, one after another, in one message each way: a batch of
   * a small model costs less than the two thread wake-ups that carry it, so an offline
   * chunk's batches go together. Each batch's outputs, or its own error.
   */
  runMany(batches: TensorMap[]): Promise<Array<TensorMap | Error>> {
    return this.queue({ batches });
  }

  private queue(work: Work): Promise<Array<TensorMap | Error>> {
    if (this.closed) return Promise.reject(new Error("model runtime is closed"));
    return new Promise((resolve, reject) => {
      this.backlog.push({ work, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiting of this.backlog.splice(0))
      waiting.reject(new Error("model runtime is closed"));
    await Promise.all(this.instances.map((inst) => inst.client.close({ type: "close" })));
  }

  private dispatch(): void {
    for (const inst of this.instances) {
      // a dead thread is never handed work again; its requests failed when it exited
      if (inst.busy || !inst.client.running) continue;
      const job = this.backlog.shift();
      if (!job) return;
      inst.busy = true;
      const { work } = job;
      const feeds = "feeds" in work ? [work.feeds] : work.batches;
      const transfer = feeds.flatMap((f) =>
        Object.values(f).map((t) => t.data.buffer as ArrayBuffer),
      );
      inst.client
        .request(
          (id) =>
            "feeds" in work
              ? { type: "run", id, feeds: work.feeds }
              : { type: "runMany", id, batches: work.batches },
          transfer,
        )
        .then(
          (reply) => {
            if (reply.type === "result") job.resolve([reply.outputs]);
            else if (reply.type === "results")
              job.resolve(
                reply.outcomes.map((o) => ("outputs" in o ? o.outputs : new Error(o.error))),
              );
            else job.reject(new Error(`unexpected ${reply.type} reply`));
          },
          (err: Error) => job.reject(err),
        )
        .finally(() => {
          inst.busy = false;
          this.dispatch();
        });
    }
  }
}

type Started = Awaited<ReturnType<typeof ThreadClient.start<ThreadRequest, ThreadReply>>>;
