import { describe, expect, it } from "vitest";
import { OutputProcessor } from "./output-processor.js";

describe("OutputProcessor", () => {
  it("passes text through when there are no stop strings", () => {
    const p = new OutputProcessor([]);
    expect(["Hel", "lo"].map((x) => p.push(x))).toEqual(["Hel", "lo"]);
    expect(p.finish("length")).toBe("");
    expect(p.text).toBe("Hello");
  });

  it("holds back a possible stop string and never sends the stop string itself", () => {
    const p = new OutputProcessor(["\n\n"]);
    expect(p.push("one\n")).toBe("one");
    expect(p.push("\ntwo")).toBe("");
    expect(p.finished).toBe("stop");
    expect(p.text).toBe("one");
  });

  it("releases held text once it cannot start a stop string", () => {
    const p = new OutputProcessor(["END"]);
    expect(p.push("the E")).toBe("the ");
    expect(p.push("N")).toBe("");
    expect(p.push("d")).toBe("ENd");
    expect(p.finish("length")).toBe("");
    expect(p.text).toBe("the ENd");
  });

  it("releases a held tail when the sequence ends for another reason", () => {
    const p = new OutputProcessor(["END"]);
    p.push("abc EN");
    expect(p.finish("length")).toBe("EN");
    expect(p.text).toBe("abc EN");
  });

  it("before min_tokens no stop string ends it, but one completed after is found whole", () => {
    const out = new OutputProcessor(["END"]);
    // a stop string wholly before the minimum passes
    expect(["a", "END", "b"].map((p) => out.push(p, false)).join("")).toBe("aENDb");
    // "EN" could begin one: held, and "D" completes it once stops apply
    expect(out.push("EN", false)).toBe("");
    expect(out.push("D", true)).toBe("");
    expect(out.finished).toBe("stop");
    expect(out.text).toBe("aENDb");
  });

  it("include_stop_str_in_output: holds nothing back and ends after the stop string, one begun in sent text too", () => {
    const p = new OutputProcessor(["END", "\n\n"], true);
    expect(p.push("the E")).toBe("the E");
    expect(p.push("N")).toBe("N");
    expect(p.push("Dless")).toBe("D");
    expect(p.finished).toBe("stop");
    expect(p.text).toBe("the END");
    const q = new OutputProcessor(["\n\n"], true);
    expect(q.push("a\n\nb")).toBe("a\n\n");
    expect(q.text).toBe("a\n\n");
  });

  it("include_stop_str_in_output before min_tokens: one wholly before passes, one completed after ends it", () => {
    const out = new OutputProcessor(["END"], true);
    expect(["a", "END", "b"].map((p) => out.push(p, false)).join("")).toBe("aENDb");
    expect(out.push("EN", false)).toBe("EN");
    expect(out.push("D!", true)).toBe("D");
    expect(out.text).toBe("aENDbEND");
  });
});
