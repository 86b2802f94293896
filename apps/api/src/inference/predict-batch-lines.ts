import { FerryError } from "@ferry/protocol";
import { endpointOf } from "../http/batch-endpoints.js";
import { type BatchLineKind, lineBody, lineOptions } from "../http/batch-line.js";
import type { InferenceService } from "./inference-service.js";
import { predictBodySchema } from "./schemas.js";

/**
 * `/v1/models/{model}/predict` lines, each answered as that predict route answers (the model
 * its url names, the version its traffic split draws).
 */
export function predictBatchLines(inference: InferenceService): BatchLineKind {
  return {
    endpoint: "/v1/models/{model}/predict",
    // a row computes in microseconds: a thousand in flight fill max_batch_size groups each turn
    linesInFlight: 1_024,
    run(url, raw, opts) {
      const model = endpointOf(url)?.model;
      if (model === undefined) throw new FerryError("NOT_FOUND", `No route for POST ${url}`);
      const body = lineBody(predictBodySchema, raw);
      return inference.predict(model, undefined, body, lineOptions(opts, body));
    },
  };
}
