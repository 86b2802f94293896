import { z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { capped, tokenIdList } from "./schemas.js";

const issue = (schema: z.ZodType, value: unknown) => {
  const first = schema.safeParse(value).error?.issues[0];
  return first && [...first.path, first.message].join(": ");
};

describe("tokenIdList", () => {
  it("takes integers from 0 up to the largest safe one, as zod's int().min(0) does", () => {
    const ids = [0, 1, 257, Number.MAX_SAFE_INTEGER];
    expect(tokenIdList(1).parse(ids)).toEqual(ids);
    expect(tokenIdList().parse([])).toEqual([]);
    for (const value of [[0], [3, 2, 1], [Number.MAX_SAFE_INTEGER]])
      expect(tokenIdList().safeParse(value).success).toBe(
        z.array(z.number().int().min(0)).safeParse(value).success,
      );
  });

  it("refuses anything else, naming the element", () => {
    expect(issue(tokenIdList(1), [])).toBe("a list of at least 1 token id");
    expect(issue(tokenIdList(), "12")).toBe("expected a list of token ids");
    expect(issue(tokenIdList(), undefined)).toBe("expected a list of token ids");
    expect(issue(tokenIdList(), [1, -1])).toBe("1: not a token id (an integer from 0): -1");
    expect(issue(tokenIdList(), [1.5])).toBe("0: not a token id (an integer from 0): 1.5");
    expect(issue(tokenIdList(), [0, "7"])).toBe('1: not a token id (an integer from 0): "7"');
    expect(issue(tokenIdList(), [2 ** 53])).toMatch(/^0: not a token id/);
    expect(issue(tokenIdList(), [null])).toMatch(/^0: not a token id .*: null$/);
    // a sparse array's hole is no token id either
    const sparse: number[] = [];
    sparse[0] = 1;
    sparse[2] = 2;
    expect(issue(tokenIdList(), sparse)).toMatch(/^1: not a token id/);
    // an element is named, never written out whole: a list 20,000 levels deep had overflowed
    // JSON.stringify's stack (a 500), and a long one cost its length
    const deep = JSON.parse(`${"[".repeat(20_000)}${"]".repeat(20_000)}`);
    expect(issue(tokenIdList(), [deep])).toBe("0: not a token id (an integer from 0): a list");
    expect(issue(tokenIdList(), [1, { a: 1 }])).toBe(
      "1: not a token id (an integer from 0): an object",
    );
    expect(issue(tokenIdList(), ["x".repeat(10_000)])?.length).toBeLessThan(200);
  });

  it("is bounded by `capped` before an element is read, and a union of texts still tells them apart", () => {
    const prompt = capped(z.union([z.string(), tokenIdList(1), z.array(z.string())]));
    expect(issue(prompt, Array(262_145).fill(1))).toBe(
      "a list of at most 262144 elements; this one has 262145",
    );
    expect(prompt.parse(["a", "b"])).toEqual(["a", "b"]);
    expect(prompt.parse([4, 2])).toEqual([4, 2]);
    expect(prompt.safeParse([4, "b"]).success).toBe(false);
    // the nearest shape's issue, at the element, as zod's own arrays report it
    const nested = capped(z.union([z.string(), tokenIdList(1), z.array(capped(tokenIdList(1)))]));
    expect(issue(nested, [[72], [1, -1]])).toBe("1: 1: not a token id (an integer from 0): -1");
  });
});
