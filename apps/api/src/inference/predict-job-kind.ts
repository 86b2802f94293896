import type { InferReply } from "@ferry/protocol";
import { invalidJobInput } from "../http/errors.js";
import type { JobKind } from "../jobs/job-kind.js";
import { type InferenceService, toPrediction } from "./inference-service.js";
import { predictBodySchema } from "./schemas.js";

/** `{features}` in a job: a predict, answered as `/v1/models/{m}/predict` answers. */
export function predictJobKind(inference: InferenceService): JobKind {
  return {
    shape: "a predict body {features}",
    formats: ["predict"],
    accept(body) {
      if (!("features" in body.input)) return undefined;
      // a predict body, named by its field: its own error, not the list of every kind's shape
      const predict = predictBodySchema.safeParse(body.input);
      if (!predict.success) throw invalidJobInput(predict.error.issues);
      const plan = inference.planPredict(body.model, body.version, predict.data);
      return { plan, meta: { format: "predict" } };
    },
    render(record) {
      const rows = (record.result as InferReply).results.map((r) => (r.ok ? r.outputs : {}));
      const plan = inference.planFor(record.model, record.version);
      const latency = (record.finished_at ?? Date.now()) - record.created_at;
      return { ...toPrediction(plan, rows[0] ?? {}), latency_ms: latency };
    },
  };
}
