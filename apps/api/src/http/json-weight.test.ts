import { describe, expect, it } from "vitest";
import { BYTES_PER_CONTAINER, containersUpTo, jsonWeight, tooHeavy } from "./json-weight.js";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("jsonWeight", () => {
  it("weighs a body by its bytes and its objects and lists", () => {
    const numbers = bytes(
      JSON.stringify({
        inputs: [
          [1.5, 2, 3],
          [4, 5, 6],
        ],
      }),
    );
    // one object, three lists
    expect(jsonWeight(numbers, 1_000_000)).toBe(numbers.byteLength + 4 * BYTES_PER_CONTAINER);
    expect(jsonWeight(bytes("7"), 1)).toBe(1);
    expect(jsonWeight(bytes(""), 0)).toBe(0);
  });

  it("refuses a body whose objects and lists cost more than the largest plain body", () => {
    // 8 MB of `{}` in a field no schema reads had held the loop ~1.6 s
    const junk = bytes(`{"inputs":[1],"junk":[${"{},".repeat(200_000)}{}]}`);
    expect(jsonWeight(junk, 8 * 1024 * 1024)).toBeUndefined();
    expect(jsonWeight(junk, 200_004 * BYTES_PER_CONTAINER + junk.byteLength)).toBe(
      junk.byteLength + 200_004 * BYTES_PER_CONTAINER,
    );
    expect(jsonWeight(junk, 200_004 * BYTES_PER_CONTAINER + junk.byteLength - 1)).toBeUndefined();
    // a body past the limit in bytes alone
    expect(jsonWeight(bytes("[1]"), 2)).toBeUndefined();
  });

  it("does not refuse braces in strings (a prompt of code), though they may be counted where the body passes", () => {
    const code = bytes(JSON.stringify({ prompt: "{[".repeat(50_000), n: [] }));
    // counted all: 100,001 brackets at 48 bytes are past 1 MB, so strings were told apart
    expect(jsonWeight(code, 1_000_000)).toBe(code.byteLength + 2 * BYTES_PER_CONTAINER);
    // with room for every bracket, strings are still told apart where their braces would more
    // than double the weight; where fewer, the quick count's overcount stands
    expect(jsonWeight(code, 10_000_000)).toBe(code.byteLength + 2 * BYTES_PER_CONTAINER);
    const prose = bytes(JSON.stringify({ prompt: `{${"a".repeat(99)}`.repeat(1_000) }));
    expect(jsonWeight(prose, 10_000_000)).toBe(prose.byteLength + 1_001 * BYTES_PER_CONTAINER);
    // an escaped quote does not end a string
    const escaped = bytes(`{"p":"\\"[[[[","q":[]}`);
    expect(containersUpTo(escaped)).toBe(2);
  });

  it("stops counting once past what it needs", () => {
    expect(containersUpTo(bytes("[[[[[[[[[["), 3)).toBe(3);
    expect(containersUpTo(bytes("[[[[[[[[[[]]]]]]]]]]"))).toBe(10);
  });

  it("says what the limit is in the refusal", () => {
    expect(tooHeavy(480).message).toMatch(/largest body \(480 bytes\).*at most 10 in a body/);
    expect(tooHeavy(480).code).toBe("PAYLOAD_TOO_LARGE");
  });
});
