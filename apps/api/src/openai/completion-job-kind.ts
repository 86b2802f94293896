import { type CompletionResult, FerryError } from "@ferry/protocol";
import { allowedPriority } from "../http/call-options.js";
import type { JobKind } from "../jobs/job-kind.js";
import type { CompletionService } from "./completion-service.js";
import { chatResponse, completionResponse } from "./openai-render.js";
import { completionRequestSchema } from "./schemas.js";

/**
 * `{prompt}` in a job: a completion, answered as `/v1/completions` answers. Its result events
 * keep the worker's {text, finish_reason, usage}, as they always have.
 */
export function completionJobKind(completions: CompletionService): JobKind {
  return {
    shape: "a completion body {prompt}",
    formats: ["completion", "chat"],
    rawResultEvents: true,
    accept(body, opts) {
      if (!("prompt" in body.input)) return undefined;
      const completion = completionRequestSchema.safeParse({ ...body.input, model: body.model });
      if (!completion.success)
        throw new FerryError("INVALID_INPUT", `input: ${completion.error.issues[0]?.message}`);
      const inner = completion.data;
      const queued = completions.submit(inner, {
        ...opts,
        priority: opts.priority ?? allowedPriority(inner.priority, opts.tenant),
        timeoutMs: opts.timeoutMs ?? inner.timeout_ms,
        version: body.version,
      });
      return { queued };
    },
    render(record) {
      const result = record.result as CompletionResult;
      return record.meta.format === "chat"
        ? chatResponse(record, result)
        : completionResponse(record, result);
    },
  };
}
