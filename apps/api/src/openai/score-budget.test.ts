import { describe, expect, it } from "vitest";
import {
  checkScoreBudget,
  defaultMaxTokensWithin,
  MAX_SCORE_ENTRIES,
  STREAMED_TOKEN_ENTRIES,
  scoreEntries,
} from "./score-budget.js";

describe("scoreEntries", () => {
  it("counts each token with its alternatives, the prompt's as often as the answer renders it", () => {
    expect(scoreEntries({ max_tokens: 100 }, {}, 50)).toBe(0);
    expect(scoreEntries({ max_tokens: 100, logprobs: 0 }, {}, 50)).toBe(100);
    expect(scoreEntries({ max_tokens: 100, logprobs: 20 }, {}, 50)).toBe(2_100);
    expect(scoreEntries({ max_tokens: 100, logprobs: 5 }, { prompt_logprobs: 1 }, 50)).toBe(700);
    // an echo's and vLLM's prompt_logprobs: scored once, rendered twice
    expect(
      scoreEntries(
        { max_tokens: 1, logprobs: 20 },
        { echo_logprobs: 20, prompt_logprobs: 20 },
        255,
      ),
    ).toBe(21 + 255 * 42);
  });

  it("a streamed token's chunk counts beside its entries when log probabilities are asked", () => {
    const streamed = { streamed: true };
    expect(scoreEntries({ max_tokens: 100, logprobs: 3 }, {}, 50, streamed)).toBe(
      100 * (4 + STREAMED_TOKEN_ENTRIES),
    );
    // without log probabilities a stream counts nothing, as an answer that is not streamed
    expect(scoreEntries({ max_tokens: 100 }, {}, 50, streamed)).toBe(0);
    // 64 streamed choices of 248 tokens with 3 alternatives (an 8.9 MB answer): past it
    expect(64 * scoreEntries({ max_tokens: 248, logprobs: 3 }, {}, 5, streamed)).toBeGreaterThan(
      MAX_SCORE_ENTRIES,
    );
  });

  it("refuses past MAX_SCORE_ENTRIES, naming both numbers", () => {
    expect(() => checkScoreBudget(MAX_SCORE_ENTRIES)).not.toThrow();
    expect(() => checkScoreBudget(MAX_SCORE_ENTRIES + 1)).toThrow(
      `asks for up to ${MAX_SCORE_ENTRIES + 1} log-probability entries`,
    );
  });
});

describe("defaultMaxTokensWithin", () => {
  it("lowers a default max_tokens to what the budget holds beside the prompt's entries", () => {
    // a chat on a 128k-context model with top_logprobs 20: 131,000 tokens would be 2.75M entries
    expect(defaultMaxTokensWithin({ max_tokens: 131_000, logprobs: 20 }, {}, 72)).toBe(3_120);
    expect(
      defaultMaxTokensWithin({ max_tokens: 131_000, logprobs: 0 }, { prompt_logprobs: 0 }, 1_000),
    ).toBe(MAX_SCORE_ENTRIES - 1_000);
    // without log probabilities, or already within: as it was
    expect(defaultMaxTokensWithin({ max_tokens: 131_000 }, {}, 72)).toBe(131_000);
    expect(defaultMaxTokensWithin({ max_tokens: 200, logprobs: 20 }, {}, 72)).toBe(200);
  });

  it("shares the budget among the request's choices, and counts a stream's chunks", () => {
    // 64 choices with 20 alternatives, no max_tokens: each choice's default is its 64th
    const each = defaultMaxTokensWithin({ max_tokens: 248, logprobs: 20 }, {}, 5, { choices: 64 });
    expect(each).toBe(Math.floor(MAX_SCORE_ENTRIES / 64 / 21));
    expect(64 * scoreEntries({ max_tokens: each, logprobs: 20 }, {}, 5)).toBeLessThanOrEqual(
      MAX_SCORE_ENTRIES,
    );
    const streamed = { choices: 64, streamed: true };
    const eachStreamed = defaultMaxTokensWithin({ max_tokens: 248, logprobs: 3 }, {}, 5, streamed);
    expect(
      64 * scoreEntries({ max_tokens: eachStreamed, logprobs: 3 }, {}, 5, streamed),
    ).toBeLessThanOrEqual(MAX_SCORE_ENTRIES);
  });
});
