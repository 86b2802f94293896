// first: before onnxruntime-node loads
import "./ort-telemetry.js";
import * as ort from "onnxruntime-node";
import { type GraphSignature, signatureOf } from "./graph-signature.js";
import { ortType, type SessionOptions, type TensorData, type TensorMap } from "./tensor.js";

/**
 * An ONNX Runtime session on the calling thread. `run` blocks that thread for the length of
 * the computation, so servers use `ModelRuntime` (worker threads) unless a model is marked
 * `inline` (small enough that blocking costs less than a thread hand-off); this class also
 * serves the thread bodies, benchmarks and reference checks.
 */
export class InProcessSession {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async load(path: string, options: SessionOptions): Promise<InProcessSession> {
    const session = await ort.InferenceSession.create(path, {
      executionProviders: [options.executionProvider],
      intraOpNumThreads: options.intraOpThreads,
      // One operator at a time: parallelism comes from batching and instance_count instead.
      interOpNumThreads: 1,
      executionMode: "sequential",
      graphOptimizationLevel: "all",
    });
    return new InProcessSession(session);
  }

  /** The graph's inputs and outputs, types and shapes: what its model.json is checked against. */
  get graph(): GraphSignature {
    return signatureOf(this.session);
  }

  async run(feeds: TensorMap): Promise<TensorMap> {
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(feeds)) {
      ortFeeds[name] = new ort.Tensor(ortType(t.data), t.data, t.dims);
    }
    const out = await this.session.run(ortFeeds);
    const result: TensorMap = {};
    for (const [name, t] of Object.entries(out)) {
      result[name] = { data: t.data as TensorData["data"], dims: [...t.dims] };
    }
    return result;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
