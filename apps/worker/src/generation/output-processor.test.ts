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
});
