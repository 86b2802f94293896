import type { CallOptions } from "../http/call.js";
import type { InferenceService, Plan } from "../inference/inference-service.js";
import type { EmbeddingsService } from "../openai/embeddings-service.js";
import { decodeV2Rows, encodeV2Response, type RequestedOutput, requestedOutputs } from "./codec.js";
import { embedderResponse, embedderTexts } from "./embedder-tensors.js";
import type { V2InferRequest, V2InferResponse } from "./schemas.js";

export type V2Plan = Plan & { outputs: RequestedOutput[] };

/**
 * KServe v2 infer on a classifier: the request's tensors decoded into rows and the answers
 * encoded back, run by the same classifier path (traffic split, deadline, stats) as predict.
 * An embedder's texts go to the embeddings service (the OpenAI route's), handed over at boot.
 */
export class V2InferService {
  constructor(
    private readonly inference: InferenceService,
    private readonly embeddings?: Pick<EmbeddingsService, "serves" | "embed">,
  ) {}

  plan(model: string, version: string | undefined, body: V2InferRequest): V2Plan {
    const { entry, version: v } = this.inference.resolveClassifier(model, version);
    const outputs = requestedOutputs(entry.config, body);
    return { entry, version: v, rows: decodeV2Rows(entry.config, body), outputs };
  }

  /** The body goes no further than its plan and its id (see `InferenceService.runWithin`). */
  infer(
    model: string,
    version: string | undefined,
    body: V2InferRequest,
    opts: CallOptions,
  ): Promise<V2InferResponse> {
    const id = body.id ?? opts.requestId;
    if (this.embeddings?.serves(model)) {
      const texts = embedderTexts(body);
      return this.embeddings
        .embed(model, version, texts, {}, opts)
        .then((done) => embedderResponse(model, done.version, id, done.vectors));
    }
    return this.inference.runWithin(
      model,
      version,
      opts,
      (v) => this.plan(model, v, body),
      (plan, rows) => encodeV2Response(plan.entry.config, plan.version, id, plan.outputs, rows),
    );
  }
}
