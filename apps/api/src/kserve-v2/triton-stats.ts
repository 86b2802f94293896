import type { ModelEntry, ModelRepository } from "@ferry/model-repository";
import { emptyCounters, type ServingStats, type VersionCounters } from "@ferry/transport";

/** A count and its total duration, as Triton's statistics give them. */
const duration = (count: number, us: number) => ({ count, ns: us * 1000 });

/**
 * One version's statistics as Triton's statistics extension gives them, from the counters the
 * API replicas and workers share: requests answered (cache hits included) and failed, with
 * their durations; the time computed rows waited for their batch; executions and their
 * compute time, in all and by batch size; cache hits and misses. Ferry times a batch's run
 * whole (its tensors' packing and splitting are a few microseconds of it): `compute_input` and
 * `compute_output` count each request with no time of their own. A cache lookup travels in
 * the same Redis call as the enqueue, so a miss has no time of its own either.
 */
export function versionStatistics(name: string, version: string, c: VersionCounters) {
  const sizes = Object.keys(c.batches)
    .map(Number)
    .sort((a, b) => a - b);
  const executions = sizes.reduce((n, size) => n + (c.batches[size]?.count ?? 0), 0);
  // a request's share of compute is its batch's run, as Triton counts it
  const computeUs = sizes.reduce((n, size) => n + (c.batches[size]?.us ?? 0) * size, 0);
  const answered = c.requests - c.errors;
  return {
    name,
    version,
    last_inference: c.last_ms,
    inference_count: c.rows,
    execution_count: executions,
    inference_stats: {
      success: duration(answered + c.cache_hits, c.ok_us + c.cache_hit_us),
      fail: duration(c.errors, c.fail_us),
      queue: duration(c.rows, c.queue_us),
      compute_input: duration(c.rows, 0),
      compute_infer: duration(c.rows, computeUs),
      compute_output: duration(c.rows, 0),
      cache_hit: duration(c.cache_hits, c.cache_hit_us),
      cache_miss: duration(c.cache_misses, 0),
    },
    batch_stats: sizes.map((size) => {
      const b = c.batches[size] ?? { count: 0, us: 0 };
      return {
        batch_size: size,
        compute_input: duration(b.count, 0),
        compute_infer: duration(b.count, b.us),
        compute_output: duration(b.count, 0),
      };
    }),
    // (ONNX Runtime's allocations are not reported per model)
    memory_usage: [] as Array<{ type: string; id: number; byte_size: number }>,
  };
}

/**
 * `GET /v2/models[/{name}[/versions/{version}]]/stats`: every version of every model, of one
 * model, or one version (an unknown model or version is a 404). Counts are the deployment's
 * since its Redis began keeping them; each process adds its own once a second.
 */
export async function tritonStatistics(
  repository: ModelRepository,
  state: Pick<ServingStats, "versionCounters">,
  name?: string,
  version?: string,
) {
  // an unknown model or version is refused as inference refuses it
  if (name && version !== undefined) repository.resolve(name, version);
  const entries: ModelEntry[] = name ? [repository.get(name)] : repository.list();
  const model_stats = [];
  for (const entry of entries) {
    const counters = await state.versionCounters(entry.config.name);
    for (const v of version === undefined ? entry.versions : [version])
      model_stats.push(versionStatistics(entry.config.name, v, counters[v] ?? emptyCounters()));
  }
  return { model_stats };
}
