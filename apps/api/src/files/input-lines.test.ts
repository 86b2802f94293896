import { describe, expect, it } from "vitest";
import { checkInputLines } from "./input-lines.js";

const line = (customId: string) =>
  JSON.stringify({
    custom_id: customId,
    method: "POST",
    url: "/v1/models/digits/predict",
    body: { features: [1] },
  });
const bytes = (...parts: Array<string | Uint8Array>) =>
  Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p)));

describe("checkInputLines", () => {
  it("drops a byte order mark at the start of any line, as a run does, wherever a chunk begins", () => {
    // the decoder had dropped one only at the start of each stored chunk
    const checked = checkInputLines(bytes(`\ufeff${line("a")}\n\ufeff${line("b")}\n`), 7);
    expect(checked.problem).toBeUndefined();
    expect(checked.customIds).toEqual(["a", "b"]);
  });

  it("refuses bytes that are not UTF-8, naming the line (they had become U+FFFD in the custom_id)", () => {
    const bad = bytes(`${line("a")}\n`, `${line("b")}`.slice(0, 14), Uint8Array.of(0xff), "\n");
    const checked = checkInputLines(bad, 10);
    expect(checked.problem).toBe("line 11 is not valid UTF-8");
    expect(checkInputLines(bytes(Uint8Array.of(0xc3)), 1).problem).toBe(
      "line 1 is not valid UTF-8",
    );
  });

  it("counts a custom_id's limit in characters, not UTF-16 units", () => {
    expect(checkInputLines(bytes(line("😀".repeat(512))), 1).problem).toBeUndefined();
    expect(checkInputLines(bytes(line("😀".repeat(513))), 1).problem).toMatch(
      /line 1 needs a custom_id: a string of 1-512 characters/,
    );
  });
});
