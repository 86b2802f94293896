import type { GraphSignature } from "./graph-signature.js";
import { InProcessSession } from "./in-process-session.js";
import { ModelRuntime, type ModelRuntimeOptions } from "./model-runtime.js";
import type { TensorMap } from "./tensor.js";

/** What a classifier server runs its batches on. */
export interface BatchRunner {
  /** The graph's inputs and outputs: what the model's model.json is checked against. */
  readonly graph: GraphSignature;
  run(feeds: TensorMap): Promise<TensorMap>;
  /**
   * Several batches one after another on one instance (in one message each way when the
   * instance is a thread): each batch's outputs, or the error it alone met.
   */
  runMany(batches: TensorMap[]): Promise<Array<TensorMap | Error>>;
  close(): Promise<void>;
}

export interface BatchRunnerOptions extends ModelRuntimeOptions {
  /** One session on the calling thread's event loop instead of `instances` threads. */
  inline: boolean;
}

/**
 * A model version's sessions: `instances` of them, each on its own thread (`ModelRuntime`), or
 * inline, one session that computes on the caller's event loop (model.json `inline`: a batch
 * of a small model costs less than the two thread wake-ups that would carry it).
 */
export async function loadBatchRunner(
  path: string,
  options: BatchRunnerOptions,
): Promise<BatchRunner> {
  const { inline, ...rest } = options;
  if (!inline) return ModelRuntime.load(path, rest);
  const session = await InProcessSession.load(path, rest);
  return {
    graph: session.graph,
    run: (feeds) => session.run(feeds),
    async runMany(batches) {
      const outcomes: Array<TensorMap | Error> = [];
      for (const feeds of batches)
        outcomes.push(await session.run(feeds).catch((err: unknown) => asError(err)));
      return outcomes;
    },
    close: () => session.release(),
  };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
