import { Agent, request } from "node:http";

/** Answers of one HTTP status: how many, and how long they took. */
export interface StatusLatency {
  count: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  /** Every answer by HTTP status (0: no answer), 200s included. */
  by_status: Record<string, StatusLatency>;
  seconds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
}

export interface LoadOptions {
  url: string;
  bodies: string[];
  concurrency: number;
  /** Stop after this many ms... */
  durationMs?: number;
  /** ...or after exactly this many requests, sent all at once up to `concurrency`. */
  total?: number;
}

/**
 * A closed-loop load generator: `concurrency` clients, each sending its next request as soon
 * as the previous answer arrives, over keep-alive connections. Latency is per request, from
 * write to the last byte of the answer.
 */
export async function closedLoop(opts: LoadOptions): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: opts.concurrency });
  const url = new URL(opts.url);
  const latencies: number[] = [];
  const byStatus = new Map<number, number[]>();
  let errors = 0;
  let sent = 0;
  const started = performance.now();
  const deadline = started + (opts.durationMs ?? Number.POSITIVE_INFINITY);
  const more = () => (opts.total !== undefined ? sent < opts.total : performance.now() < deadline);
  const client = async () => {
    while (more()) {
      const body = opts.bodies[sent++ % opts.bodies.length] ?? "{}";
      const t0 = performance.now();
      const status = await post(agent, url, body);
      const took = performance.now() - t0;
      if (status === 200) latencies.push(took);
      else errors++;
      let list = byStatus.get(status);
      if (!list) {
        list = [];
        byStatus.set(status, list);
      }
      list.push(took);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, client));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const by_status: Record<string, StatusLatency> = {};
  for (const [status, list] of byStatus) {
    list.sort((a, b) => a - b);
    by_status[String(status)] = {
      count: list.length,
      p50_ms: round(quantile(list, 0.5)),
      p99_ms: round(quantile(list, 0.99)),
      max_ms: round(list.at(-1) ?? Number.NaN),
    };
  }
  return {
    requests: latencies.length,
    errors,
    by_status,
    seconds: round(seconds),
    rps: round(latencies.length / seconds),
    p50_ms: round(quantile(latencies, 0.5)),
    p99_ms: round(quantile(latencies, 0.99)),
  };
}

function post(agent: Agent, url: URL, body: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
