import { describe, expect, it } from "vitest";
import { decodeChunkAnswers, encodeChunkAnswers } from "./chunk-answers.js";

describe("a chunk's answers kept whole", () => {
  it("gives back each file's block as it went in, lines with any characters", () => {
    const ok = ['{"custom_id":"é😀\\n"}', '{"custom_id":"b"}'];
    const failed = ['{"custom_id":"c","response":{"status_code":400}}'];
    const back = decodeChunkAnswers(encodeChunkAnswers(ok, failed));
    expect(back.ok).toEqual({ text: ok.join("\n"), lines: 2 });
    expect(back.failed).toEqual({ text: failed[0], lines: 1 });
  });

  it("an empty block is empty, on either side", () => {
    expect(decodeChunkAnswers(encodeChunkAnswers([], ["x"]))).toEqual({
      ok: { text: "", lines: 0 },
      failed: { text: "x", lines: 1 },
    });
    expect(decodeChunkAnswers(encodeChunkAnswers(["y"], []))).toEqual({
      ok: { text: "y", lines: 1 },
      failed: { text: "", lines: 0 },
    });
  });

  it("refuses a value with no header", () => {
    expect(() => decodeChunkAnswers("no header")).toThrow(/no header/);
  });
});
