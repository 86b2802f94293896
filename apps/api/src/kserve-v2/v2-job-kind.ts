import type { InferReply } from "@ferry/protocol";
import { invalidJobInput } from "../http/errors.js";
import type { InferenceService } from "../inference/inference-service.js";
import type { JobKind } from "../jobs/job-kind.js";
import { encodeV2Response, type RequestedOutput } from "./codec.js";
import { v2InferRequestSchema } from "./schemas.js";
import type { V2InferService } from "./v2-infer-service.js";

interface V2JobMeta {
  outputs: Array<RequestedOutput | string>;
  id: string | undefined;
}

/** `{inputs}` in a job: a v2 infer, answered as `/v2/models/{m}/infer` answers. */
export function v2JobKind(v2: V2InferService, inference: InferenceService): JobKind {
  return {
    shape: "a v2 infer body {inputs}",
    formats: ["v2"],
    accept(body) {
      if (!("inputs" in body.input)) return undefined;
      // a v2 body, named by its field: its own error, not the list of every kind's shape
      const parsed = v2InferRequestSchema.safeParse(body.input);
      if (!parsed.success) throw invalidJobInput(parsed.error.issues);
      const plan = v2.plan(body.model, body.version, parsed.data);
      return { plan, meta: { format: "v2", outputs: plan.outputs, id: parsed.data.id } };
    },
    render(record) {
      const meta = record.meta as unknown as V2JobMeta;
      const rows = (record.result as InferReply).results.map((r) => (r.ok ? r.outputs : {}));
      const { entry } = inference.planFor(record.model, record.version);
      return encodeV2Response(
        entry.config,
        record.version,
        meta.id ?? record.id,
        meta.outputs,
        rows,
      );
    },
  };
}
