import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// An OpenAI predict batch over two models, one of which no worker serves: each model's lines
// run apart, so the served model's are answered and the other's fail in a predict's timeout
// (1.5 s here), not at the end of the batch's window.
const repository = tempRepository({ digits: {}, mnist: { default_timeout_ms: 1_500 } });
const stack = new Stack({ env: { MODEL_REPOSITORY: repository, WORKER_MODELS: "digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

describe("an OpenAI predict batch across models", () => {
  it("a model no worker serves fails its own lines (503) and holds no other model's", async () => {
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const digits = samples.digits.inputs.slice(0, 10);
    const lines = [
      {
        custom_id: "m0",
        method: "POST",
        url: "/v1/models/mnist/predict",
        body: { features: new Array(784).fill(0) },
      },
      ...digits.map((features, k) => ({
        custom_id: `d${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features },
      })),
    ];
    const file = await openai.files.create({
      file: await toFile(
        Buffer.from(`${lines.map((l) => JSON.stringify(l)).join("\n")}\n`),
        "in.jsonl",
      ),
      purpose: "batch",
    });
    const created = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/models/{model}/predict" as "/v1/chat/completions",
      completion_window: "24h",
    });
    let batch = created;
    await waitFor(async () => {
      batch = await openai.batches.retrieve(created.id);
      return batch.status === "completed";
    }, 30_000);
    expect(batch.request_counts).toEqual({ total: 11, completed: 10, failed: 1 });
    const errors = (await (await openai.files.content(batch.error_file_id ?? "")).text())
      .trim()
      .split("\n")
      .map(
        (l) =>
          JSON.parse(l) as {
            custom_id: string;
            response: { status_code: number; body: { error: { message: string } } };
          },
      );
    expect(errors.map((e) => e.custom_id)).toEqual(["m0"]);
    expect(errors[0]?.response.status_code).toBe(503);
    expect(errors[0]?.response.body.error.message).toMatch(/no worker serves model 'mnist'/);
  });
});
