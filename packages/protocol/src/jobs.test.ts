import { describe, expect, it } from "vitest";
import { bullPriority, priorityOfBull, TURNS } from "./jobs.js";

describe("BullMQ's priority of a request", () => {
  it("orders priorities first (10 the most urgent), then turns within one", () => {
    expect(bullPriority(10, TURNS - 1)).toBeLessThan(bullPriority(9, 0));
    expect(bullPriority(5, 0)).toBeLessThan(bullPriority(5, 1));
    // a turn past the last shares the last: it never reaches the priority below
    expect(bullPriority(5, 10 * TURNS)).toBe(bullPriority(5, TURNS - 1));
    expect(bullPriority(5, 10 * TURNS)).toBeLessThan(bullPriority(4, 0));
  });

  it("reads back the priority, turns or not (a job queued before turns wrote 1-10)", () => {
    for (let priority = 1; priority <= 10; priority++) {
      expect(priorityOfBull(bullPriority(priority, 0))).toBe(priority);
      expect(priorityOfBull(bullPriority(priority, 37))).toBe(priority);
      expect(priorityOfBull(bullPriority(priority, TURNS - 1))).toBe(priority);
      expect(priorityOfBull(11 - priority)).toBe(priority);
    }
    expect(priorityOfBull(0)).toBe(5);
  });
});
