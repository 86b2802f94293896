import { request } from "node:http";
import { type Connection, HttpConnection, NodeHttpConnection } from "./http-client.js";

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
  /** The same, for requests sent `steadyAfterMs` or later after the start (when asked for). */
  steady_by_status?: Record<string, StatusLatency>;
  /**
   * The first body of each status other than 200, 202 and 429 (cut to 300 characters): an
   * error a run shows says what it was.
   */
  first_error_body: Record<string, string>;
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
  /**
   * Every client opens its connection with one unmeasured request (in waves), and the clock
   * starts once all have been answered: a pool of clients that is already connected, as a
   * fleet of callers is. A request, not only the TCP handshake: a connection the kernel has
   * completed waits in the listen queue until the server accepts it, and a busy Node server
   * accepts one per event-loop turn (libuv), so hundreds merely connected when the clock
   * starts are accepted over the whole run (a probe on a new connection behind them waited
   * past 10 s): a cost of connecting during a flood (the API's PROBE_PORT keeps probes out of
   * it), not of the requests these rows measure. Thousands
   * of connects in one burst stall for seconds on this machine whatever the server (the bare
   * node:http one too: p99 16 s), and that would be measured as the server's latency.
   */
  connectFirst?: boolean;
  /**
   * A client refused with 429 waits the Retry-After it was given before it sends again, as
   * the openai client and most SDKs do; without it, it sends again at once (a load generator).
   */
  honourRetryAfter?: boolean;
  /**
   * Keep-alive connections shared with other runs (opened once, left open; one per client, at
   * least `concurrency` of them): rounds of one client fleet. Without them each run opens
   * connections of its own and closes them after.
   */
  connections?: Connection[];
  /** Clients on node:http's client instead of `HttpConnection` (when they have none given). */
  nodeHttp?: boolean;
  /**
   * Also report the answers to requests sent this long after the start, apart
   * (`steady_by_status`): a flood's opening burst, every client's first request in the same
   * millisecond, and what follows it.
   */
  steadyAfterMs?: number;
  /** Called when the clock starts (after the connections, when they are opened first). */
  onStart?: (() => void) | undefined;
}

/** Clients that open their connections at once, when they connect first. */
const CONNECT_WAVE = 200;

/**
 * A closed-loop load generator: `concurrency` clients, each sending its next request as soon
 * as the previous answer arrives, over keep-alive connections (`HttpConnection`, one per
 * client). Latency is per request, from write to the last byte of the answer.
 */

export async function closedLoop(opts: LoadOptions): Promise<LoadResult> {
  const url = new URL(opts.url);
  const latencies: number[] = [];
  const byStatus = new Map<number, number[]>();
  const steadyByStatus = new Map<number, number[]>();
  const firstErrorBody: Record<string, string> = {};
  let errors = 0;
  let sent = 0;
  const connections =
    opts.connections?.slice(0, opts.concurrency) ??
    Array.from({ length: opts.concurrency }, () =>
      opts.nodeHttp ? new NodeHttpConnection(url) : new HttpConnection(url),
    );
  if (connections.length < opts.concurrency)
    throw new Error(
      `closedLoop: ${connections.length} connections for ${opts.concurrency} clients`,
    );
  if (opts.connectFirst) {
    const body = opts.bodies[0] ?? "{}";
    for (let i = 0; i < opts.concurrency; i += CONNECT_WAVE)
      await Promise.all(
        connections.slice(i, i + CONNECT_WAVE).map((c) => c.post(url.pathname, body)),
      );
  }
  const started = performance.now();
  opts.onStart?.();
  const deadline = started + (opts.durationMs ?? Number.POSITIVE_INFINITY);
  const more = () => (opts.total !== undefined ? sent < opts.total : performance.now() < deadline);
  const client = async (connection: Connection) => {
    while (more()) {
      const body = opts.bodies[sent++ % opts.bodies.length] ?? "{}";
      const t0 = performance.now();
      const { status, retryAfterS, body: answer } = await connection.post(url.pathname, body);
      const took = performance.now() - t0;
      // 200 for an answer, 202 for an accepted job; an error's body is kept, to be shown
      if (status === 200 || status === 202) latencies.push(took);
      else errors++;
      if (status !== 200 && status !== 202 && status !== 429)
        firstErrorBody[String(status)] ??= answer.toString().slice(0, 300);
      record(byStatus, status, took);
      if (opts.steadyAfterMs !== undefined && t0 - started >= opts.steadyAfterMs)
        record(steadyByStatus, status, took);
      if (status === 429 && opts.honourRetryAfter && retryAfterS > 0)
        await new Promise((r) =>
          setTimeout(r, Math.min(retryAfterS * 1000, deadline - performance.now())),
        );
    }
  };
  await Promise.all(connections.map(client));
  const seconds = (performance.now() - started) / 1000;
  if (!opts.connections) for (const c of connections) c.close();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    by_status: summarise(byStatus),
    ...(opts.steadyAfterMs !== undefined ? { steady_by_status: summarise(steadyByStatus) } : {}),
    first_error_body: firstErrorBody,
    seconds: round(seconds),
    rps: round(latencies.length / seconds),
    p50_ms: round(quantile(latencies, 0.5)),
    p99_ms: round(quantile(latencies, 0.99)),
  };
}

function record(byStatus: Map<number, number[]>, status: number, took: number): void {
  let list = byStatus.get(status);
  if (!list) {
    list = [];
    byStatus.set(status, list);
  }
  list.push(took);
}

function summarise(byStatus: Map<number, number[]>): Record<string, StatusLatency> {
  const out: Record<string, StatusLatency> = {};
  for (const [status, list] of byStatus) {
    list.sort((a, b) => a - b);
    out[String(status)] = {
      count: list.length,
      p50_ms: round(quantile(list, 0.5)),
      p99_ms: round(quantile(list, 0.99)),
      max_ms: round(list.at(-1) ?? Number.NaN),
    };
  }
  return out;
}

/**
 * A GET of `url` every `intervalMs` on a new connection, as a kubelet probes, until `until`
 * settles: how long each took to answer (or to fail).
 */
export async function probeWhile(
  url: string,
  intervalMs: number,
  until: Promise<unknown>,
): Promise<StatusLatency> {
  let done = false;
  const stop = () => {
    done = true;
  };
  until.then(stop, stop);
  const took: number[] = [];
  while (!done) {
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      const req = request(url, { agent: false }, (res) => {
        res.resume();
        res.on("end", resolve);
      });
      req.on("error", () => resolve());
      // a probe that hangs must not hang the bench: it is cut, and counted at its length
      req.setTimeout(10_000, () => req.destroy());
      req.end();
    });
    took.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return summarise(new Map([[200, took]]))["200"] as StatusLatency;
}

export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** The median of unsorted values (the upper one of an even count, as `quantile` gives). */
export function median(values: readonly number[]): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
