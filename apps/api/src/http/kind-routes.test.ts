import { describe, expect, it } from "vitest";
import { wrongKind } from "./kind-routes.js";

describe("wrongKind", () => {
  it("names the route that serves the model's kind", () => {
    expect(wrongKind("bert-fortunes", "embedder")).toBe(
      "Model 'bert-fortunes' is an embedder; use /v1/embeddings",
    );
    expect(wrongKind("digits", "classifier")).toBe(
      "Model 'digits' is a classifier; use /v1/models/digits/predict",
    );
    expect(wrongKind("tiny-lm", "generator")).toBe(
      "Model 'tiny-lm' is a generator; use /v1/completions or /v1/chat/completions",
    );
  });
});
