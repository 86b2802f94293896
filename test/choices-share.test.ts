import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

// tiny-lm has no worker here: what is queued for it stays queued. Its queue holds 32, one key
// 8 of it (KEY_QUEUE_SHARE 0.25).
const repo = tempRepository({ digits: {}, "tiny-lm": { max_queue_size: 32 } });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "k1,k2", KEY_QUEUE_SHARE: "0.25" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/**
 * A chat of `n` choices with a deadline 4 s away: refused at once, or queued, and then (no
 * worker takes it) expired at its deadline with a 504.
 */
async function chat(n: number, k: number): Promise<{ status: number; text: string }> {
  const res = await fetch(stack.url("/v1/chat/completions"), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Authorization: "Bearer k1",
      "X-Timeout-Ms": "4000",
    },
    body: JSON.stringify({
      model: "tiny-lm",
      messages: [{ role: "user", content: `hi ${k}` }],
      max_tokens: 4,
      n,
    }),
  });
  return { status: res.status, text: await res.text() };
}

describe("one key's requests of several choices at once", () => {
  it("are queued whole or refused whole: two of four 4-choice requests fit its 8 places, side by side", async () => {
    // taken a choice at a time, four such requests each took two places and were all refused
    // (and their retries, again and again, though two fit)
    const answers = await Promise.all([0, 1, 2, 3].map((k) => chat(4, k)));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([429, 429, 504, 504]);
    for (const refused of answers.filter((a) => a.status === 429))
      expect(refused.text).toMatch(
        /This request's 4 choices need 4 places among those one key may have waiting for tiny-lm\.v1, and this key has 8 of its 8 taken/,
      );
  }, 30_000);

  it("more choices than the key may ever have waiting: a 400 that says so, not a 429 to retry", async () => {
    const res = await fetch(stack.url("/v1/chat/completions"), {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer k2" },
      body: JSON.stringify({
        model: "tiny-lm",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
        n: 9,
      }),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(
      /This request's 9 choices are more than one key may have waiting for tiny-lm\.v1 \(8: KEY_QUEUE_SHARE of the queue's 32\)/,
    );
  });
});
