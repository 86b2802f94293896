import { describe, expect, it } from "vitest";
import { secretEquals } from "./auth.js";

describe("secretEquals", () => {
  it("matches only the same secret, whatever the lengths", () => {
    expect(secretEquals("k-123", "k-123")).toBe(true);
    expect(secretEquals("k-124", "k-123")).toBe(false);
    expect(secretEquals("k", "k-123")).toBe(false);
    expect(secretEquals("", "k-123")).toBe(false);
  });
});
