import type { ModelEntry } from "@ferry/model-repository";
import type { ServingState } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { TrafficRouter, validateSplit } from "./traffic-router.js";

const entry = {
  config: { name: "digits" },
  versions: ["1", "2"],
  defaultVersion: "2",
} as unknown as ModelEntry;
const stateWith = (split: Record<string, number> | null) =>
  ({ getTraffic: async () => split }) as unknown as ServingState;

describe("TrafficRouter", () => {
  it("sends everything to the stable version without a split", async () => {
    expect(await new TrafficRouter(stateWith(null), () => 0.99).pick(entry)).toBe("2");
  });

  it("draws by the split's percentages", async () => {
    const split = { "1": 90, "2": 10 };
    expect(await new TrafficRouter(stateWith(split), () => 0.5).pick(entry)).toBe("1");
    expect(await new TrafficRouter(stateWith(split), () => 0.95).pick(entry)).toBe("2");
  });

  it("validates splits", () => {
    expect(validateSplit(entry, { "1": 90, "2": 10 })).toEqual({ "1": 90, "2": 10 });
    expect(() => validateSplit(entry, { "1": 90, "2": 20 })).toThrow(/add up to 100, got 110/);
    expect(() => validateSplit(entry, { "3": 100 })).toThrow(/no version '3'/);
    expect(() => validateSplit(entry, { "1": 50.5, "2": 49.5 })).toThrow(/whole percentage/);
  });
});
