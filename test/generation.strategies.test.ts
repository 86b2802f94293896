import { describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { referenceGreedy } from "./helpers/reference-lm.js";
import { Stack } from "./helpers/stack.js";

// Each step strategy the engine can be configured with decodes exactly what the model decodes
// alone: sequences joining and leaving a running batch must not change a single token.
const strategies: Record<string, Record<string, unknown>> = {
  "prefill thread (the default)": {},
  "prefill in a pass of its own": { prefill_thread: false },
  "prefill mixed into the decode step": { mixed_prefill: true },
  "static batching": { policy: "static", static_wait_ms: 20 },
};
const prompts = [
  "Q: Why is the sky blue?\nA:",
  "It was a dark and stormy night",
  "The best thing about Mondays",
  "A",
  "Never trust a computer you can't throw out a window.",
  "Q: What is the meaning of life?\nA:",
];
const lengths = [12, 40, 25, 60, 8, 33];

describe("every step strategy decodes as the model does alone", () => {
  for (const [name, scheduler] of Object.entries(strategies)) {
    it(name, async () => {
      const repo = tempRepository({
        "tiny-lm": {
          scheduler: { max_num_seqs: 4, max_num_batched_tokens: 2048, ...scheduler },
        },
      });
      const stack = await new Stack({
        env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" },
      }).start();
      try {
        // more completions than seats, of mixed lengths: joins and leaves mid-batch
        const texts = await Promise.all(
          prompts.map(async (prompt, k) => {
            const res = await stack.post("/v1/completions", {
              model: "tiny-lm",
              prompt,
              max_tokens: lengths[k],
              temperature: 0,
              ignore_eos: true,
            });
            expect(res.status).toBe(200);
            return ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]?.text;
          }),
        );
        const reference = await Promise.all(
          prompts.map((p, k) => referenceGreedy(p, lengths[k] ?? 0)),
        );
        expect(texts).toEqual(reference);
      } finally {
        await stack.stop();
      }
    });
  }
});
