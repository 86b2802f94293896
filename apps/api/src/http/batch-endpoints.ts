/** The routes a batch's lines may run on (OpenAI's Batch API, and Ferry's predict). */
export const BATCH_ENDPOINTS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/embeddings",
  "/v1/models/{model}/predict",
] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** Predict's url, whose path names the model. */
const PREDICT = /^\/v1\/models\/([^/?#]+)\/predict$/;

/** The endpoint a line's url runs on, and the model its path names; undefined: none. */
export function endpointOf(
  url: string,
): { endpoint: BatchEndpoint; model?: string | undefined } | undefined {
  const predict = PREDICT.exec(url);
  if (predict) {
    return { endpoint: "/v1/models/{model}/predict", model: decoded(predict[1] ?? "") };
  }
  return (BATCH_ENDPOINTS as readonly string[]).includes(url)
    ? { endpoint: url as BatchEndpoint }
    : undefined;
}

/**
 * A path segment decoded as the live route's router decodes it: a malformed escape (`%E0`)
 * stays as it is, a name no model has, rather than an exception.
 */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * Whether a line's url runs on a batch's endpoint: the same route, or for predict the
 * endpoint's model (`/v1/models/digits/predict`) or any model (`/v1/models/{model}/predict`).
 */
export function urlFits(url: string, endpoint: string): boolean {
  if (url === endpoint) return true;
  return endpoint === "/v1/models/{model}/predict" && PREDICT.test(url);
}
