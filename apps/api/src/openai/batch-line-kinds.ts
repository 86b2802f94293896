import { FerryError } from "@ferry/protocol";
import { type BatchLineKind, lineBody, lineOptions } from "../http/batch-line.js";
import type { CompletionService } from "./completion-service.js";
import { embeddingsRequestSchema } from "./embeddings-schemas.js";
import type { EmbeddingsService } from "./embeddings-service.js";
import { responsesRequestSchema } from "./responses-schemas.js";
import type { ResponsesService } from "./responses-service.js";
import { chatCompletionRequestSchema, completionRequestSchema } from "./schemas.js";

/** A batch's answer is a file, never a stream. */
function notStreamed(body: { stream?: boolean | null | undefined }): void {
  if (body.stream)
    throw new FerryError(
      "INVALID_INPUT",
      "stream is not supported in a batch: each answer is written to the batch's output file",
    );
}

/** `/v1/chat/completions` lines, answered as the chat route answers (not streamed). */
export function chatBatchLines(completions: CompletionService): BatchLineKind {
  return {
    endpoint: "/v1/chat/completions",
    run(_url, raw, opts, signal) {
      const body = lineBody(chatCompletionRequestSchema, raw);
      notStreamed(body);
      return completions.complete(body, lineOptions(opts, body), signal);
    },
  };
}

/** `/v1/completions` lines, answered as the completions route answers (not streamed). */
export function completionBatchLines(completions: CompletionService): BatchLineKind {
  return {
    endpoint: "/v1/completions",
    run(_url, raw, opts, signal) {
      const body = lineBody(completionRequestSchema, raw);
      notStreamed(body);
      return completions.complete(body, lineOptions(opts, body), signal);
    },
  };
}

/** `/v1/embeddings` lines, answered as the embeddings route answers. */
export function embeddingsBatchLines(embeddings: EmbeddingsService): BatchLineKind {
  return {
    endpoint: "/v1/embeddings",
    run(_url, raw, opts) {
      const body = lineBody(embeddingsRequestSchema, raw);
      return embeddings.create(body, lineOptions(opts, {}));
    },
  };
}

/**
 * `/v1/responses` lines, answered as the Responses route answers a request that is neither
 * streamed nor in the background (a batch is its background).
 */
export function responsesBatchLines(responses: ResponsesService): BatchLineKind {
  return {
    endpoint: "/v1/responses",
    run(_url, raw, opts, signal) {
      const body = lineBody(responsesRequestSchema, raw);
      notStreamed(body);
      if (body.background)
        throw new FerryError("INVALID_INPUT", "background is not supported in a batch line");
      return responses.create(body, lineOptions(opts, body), signal);
    },
  };
}
