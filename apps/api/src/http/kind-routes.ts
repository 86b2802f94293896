/**
 * A model on a route that does not serve its kind: the refusal names the route that does
 * (a hint to another route that refuses it too had sent callers in a circle).
 */
export function wrongKind(model: string, kind: string): string {
  const route =
    kind === "embedder"
      ? "/v1/embeddings"
      : kind === "classifier"
        ? `/v1/models/${model}/predict`
        : "/v1/completions or /v1/chat/completions";
  const article = /^[aeiou]/.test(kind) ? "an" : "a";
  return `Model '${model}' is ${article} ${kind}; use ${route}`;
}
