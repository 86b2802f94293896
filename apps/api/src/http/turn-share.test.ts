import { setImmediate as nextTurn } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { TurnShare } from "./turn-share.js";

/** A share of 10 ms on a clock the test moves. */
function share() {
  const clock = { t: 0 };
  return { clock, turns: new TurnShare(10, () => clock.t) };
}

/**
 * A turn that has done its 10 ms, then `names` taking a share each: every one that is let go
 * records its name and works `workMs` on the clock. Returns the names let go so far, in order.
 */
function busyTurn(names: string[], workMs: number) {
  const { clock, turns } = share();
  turns.take();
  clock.t = 10;
  const went: string[] = [];
  for (const name of names) {
    const turn = turns.take();
    expect(turn).toBeInstanceOf(Promise);
    void turn?.then(() => {
      went.push(name);
      clock.t += workMs;
    });
  }
  return { clock, turns, went };
}

describe("TurnShare", () => {
  it("lets work go at once while the turn has done less than its share", async () => {
    const { clock, turns } = share();
    expect(turns.take()).toBeUndefined();
    clock.t = 9;
    expect(turns.take()).toBeUndefined();
    // a later turn starts its own count
    clock.t = 50;
    await nextTurn();
    expect(turns.take()).toBeUndefined();
  });

  it("holds work past the turn's share for later turns, a slice each, in arrival order", async () => {
    // each waiter works 6 ms once let go: two fit in a 10 ms slice
    const { turns, went } = busyTurn(["a", "b", "c", "d", "e"], 6);
    expect(turns.queued).toBe(5);
    expect(went).toEqual([]);

    await nextTurn();
    expect(went).toEqual(["a", "b"]);
    // while some wait, newcomers queue behind them even in a fresh turn
    const late = turns.take();
    expect(late).toBeInstanceOf(Promise);
    void late?.then(() => went.push("late"));

    await nextTurn();
    expect(went).toEqual(["a", "b", "c", "d"]);
    await nextTurn();
    expect(went).toEqual(["a", "b", "c", "d", "e", "late"]);
    expect(turns.queued).toBe(0);

    // drained: the next turn's work goes at once again
    await nextTurn();
    expect(turns.take()).toBeUndefined();
  });

  it("gives a slice as long as the rest of the loop took since the last one", async () => {
    const { clock, went } = busyTurn(["a", "b", "c", "d", "e", "f", "g", "h"], 6);
    await nextTurn();
    expect(went).toEqual(["a", "b"]);
    // the poll phase in between (refusals, answers) took 30 ms: parsing gets as long
    clock.t += 30;
    await nextTurn();
    expect(went).toEqual(["a", "b", "c", "d", "e", "f", "g"]);
  });

  it("lets one waiter go per slice even when it alone outlasts the slice", async () => {
    const { went } = busyTurn(["a", "b"], 25);
    await nextTurn();
    expect(went).toEqual(["a"]);
    await nextTurn();
    expect(went).toEqual(["a", "b"]);
  });
});
