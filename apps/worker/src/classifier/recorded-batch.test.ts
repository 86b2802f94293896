import { describe, expect, it } from "vitest";
import { WorkerMetrics } from "../metrics.js";
import { recordedBatchRun, type TracedRow } from "./recorded-batch.js";

/** A row the tests batch: a number, and no trace. */
type Row = TracedRow & { x: number };

const labels = { model: "digits", version: "2" };

async function metric(metrics: WorkerMetrics, name: string): Promise<Record<string, number>> {
  const found = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return Object.fromEntries(
    (found?.values ?? []).map((v) => [
      String((v as { metricName?: string }).metricName ?? name),
      Number(v.value),
    ]),
  );
}

describe("recordedBatchRun", () => {
  it("records each batch's size, the rows waiting, its compute time and its statistics", async () => {
    const metrics = new WorkerMetrics();
    const executions: Array<[string, string, number]> = [];
    const run = recordedBatchRun<Row, number>(
      labels,
      metrics,
      { execution: (model, version, rows) => executions.push([model, version, rows]) },
      () => 7,
      async (rows) => rows.map((r) => r.x * 2),
    );
    expect(await run([{ x: 1 }, { x: 2 }, { x: 3 }])).toEqual([2, 4, 6]);
    expect(await run([{ x: 5 }])).toEqual([10]);
    const sizes = await metric(metrics, "ferry_worker_batch_size");
    expect(sizes.ferry_worker_batch_size_count).toBe(2);
    expect(sizes.ferry_worker_batch_size_sum).toBe(4);
    expect((await metric(metrics, "ferry_worker_pending_rows")).ferry_worker_pending_rows).toBe(7);
    const compute = await metric(metrics, "ferry_worker_compute_seconds");
    expect(compute.ferry_worker_compute_seconds_count).toBe(2);
    expect(executions).toEqual([
      ["digits", "2", 3],
      ["digits", "2", 1],
    ]);
  });

  it("a failed run still counts its time and statistics, and its error reaches the batcher", async () => {
    const metrics = new WorkerMetrics();
    let executions = 0;
    const run = recordedBatchRun<Row, number>(
      labels,
      metrics,
      { execution: () => executions++ },
      () => 0,
      async () => {
        throw new Error("the model failed");
      },
    );
    await expect(run([{ x: 1 }])).rejects.toThrow("the model failed");
    expect(executions).toBe(1);
    const compute = await metric(metrics, "ferry_worker_compute_seconds");
    expect(compute.ferry_worker_compute_seconds_count).toBe(1);
  });
});
