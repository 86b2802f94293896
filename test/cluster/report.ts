import type { Done, Outcome } from "./load-client.js";

const OUTCOMES: Outcome[] = ["completed", "rejected", "lost", "duplicated", "wrong"];

/** Counts by outcome (all and per kind), and completions per second over the run. */
export function summarize(done: Done[]) {
  const count = (list: Done[]) => {
    const c = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
    for (const d of list) c[d.outcome]++;
    return { sent: list.length, accepted: list.length - c.rejected, ...c };
  };
  const counts = count(done);
  const row = (name: string, c: ReturnType<typeof count>) =>
    `${name.padEnd(8)} ${[
      c.sent,
      c.accepted,
      c.completed,
      c.lost,
      c.duplicated,
      c.wrong,
      c.rejected,
    ]
      .map((n) => String(n).padStart(9))
      .join("")}`;
  const table = [
    "",
    `${"".padEnd(8)} ${["sent", "accepted", "completed", "lost", "duplicated", "wrong", "rejected"].map((h) => h.padStart(9)).join("")}`,
    row("jobs", count(done.filter((d) => d.kind === "job"))),
    row("streams", count(done.filter((d) => d.kind === "stream"))),
    row("all", counts),
  ].join("\n");
  const timeline = (from: number) => {
    const buckets: number[] = [];
    for (const d of done) {
      if (d.outcome !== "completed") continue;
      const s = Math.floor((d.t - from) / 1000);
      if (s >= 0) buckets[s] = (buckets[s] ?? 0) + 1;
    }
    return Array.from(buckets, (n) => n ?? 0).join(" ");
  };
  return { counts, table, timeline };
}

/**
 * How a fault at `at` was absorbed: when every request in flight at that moment was answered
 * (and how many only after `lockMs`, i.e. once another worker took them over),
 * and when the completion rate (over 2 s windows, stepping 0.5 s) came back to 70% of the rate
 * in the 5 s before the fault.
 */
export function recoveryAfter(
  done: Done[],
  at: number,
  lockMs: number,
): { recoveredMs?: number; takenOver: number; text: string } {
  const completed = done.filter((d) => d.outcome === "completed");
  const baseline = completed.filter((d) => d.t >= at - 5_000 && d.t < at).length / 5;
  const inFlight = done.filter((d) => d.accepted !== null && d.accepted < at && d.t >= at);
  const lastMs = Math.max(0, ...inFlight.map((d) => d.t - at));
  // answered only after the lock lapsed: these waited for another worker to take them over
  const takenOver = inFlight.filter((d) => d.t - at >= lockMs).length;
  let recoveredMs: number | undefined;
  const end = Math.max(...completed.map((d) => d.t));
  for (let start = at; start + 2_000 <= end; start += 500) {
    const rate = completed.filter((d) => d.t >= start && d.t < start + 2_000).length / 2;
    if (rate >= 0.7 * baseline) {
      recoveredMs = start - at;
      break;
    }
  }
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const text = [
    `${inFlight.length} requests in flight, all answered within ${s(lastMs)} (${takenOver} after the lock lapsed)`,
    recoveredMs === undefined
      ? `throughput (${baseline.toFixed(1)}/s before) never recovered`
      : `throughput back to >= 70% of ${baseline.toFixed(1)}/s after ${s(recoveredMs)}`,
  ].join("; ");
  return recoveredMs === undefined ? { takenOver, text } : { recoveredMs, takenOver, text };
}
