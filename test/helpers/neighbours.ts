import type { Stack } from "./stack.js";

/**
 * `n` completions of 200 tokens each, one after another per client, until stopped: they share
 * the decode batch, so that a stream under test is still running when its client leaves
 * (alone, tiny-lm writes 200 tokens in a fraction of a second). Resolves once they are done.
 */
export function busyNeighbours(stack: Stack, n: number): { stop: () => Promise<void> } {
  let busy = true;
  const clients = Array.from({ length: n }, async (_, k) => {
    while (busy)
      await (
        await stack.post("/v1/completions", {
          model: "tiny-lm",
          prompt: `Q: ${k}?`,
          max_tokens: 200,
          ignore_eos: true,
        })
      ).arrayBuffer();
  });
  return {
    stop: async () => {
      busy = false;
      await Promise.all(clients);
    },
  };
}
