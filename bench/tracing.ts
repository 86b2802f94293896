import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../scripts/free-port.js";
import { tempRepository } from "../test/helpers/model-repo.js";
import { Stack, waitFor } from "../test/helpers/stack.js";
import { uniqueBodies } from "./classifier.js";
import { closedLoop, median, round } from "./load.js";
import { printTable } from "./table.js";

/** Rounds per arm: `--rounds=N` (the noisier the machine, the more). */
const ROUNDS = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 3) || 3;
/** Seconds per arm in a round: `--seconds=N`. */
const SECONDS = Number(process.argv.find((a) => a.startsWith("--seconds="))?.slice(10) ?? 5) || 5;
const CLIENTS = 64;

let sent = 5_000_000;
/** Inputs no earlier request of this bench sent: every request is a model run. */
function fresh(n: number): string[] {
  const out = uniqueBodies(n, sent);
  sent += n;
  return out;
}

/** The `--baseline=<git ref>` flag: the code at that commit becomes a third arm. */
const BASELINE = process.argv.find((a) => a.startsWith("--baseline="))?.slice("--baseline=".length);
/** The traced stack's OTLP protocol: http/protobuf (the SDK's default) or http/json. */
const PROTOCOL =
  process.argv.find((a) => a.startsWith("--protocol="))?.slice("--protocol=".length) ??
  "http/protobuf";
if (PROTOCOL !== "http/protobuf" && PROTOCOL !== "http/json")
  throw new Error(`--protocol: http/protobuf or http/json, not ${PROTOCOL}`);

/**
 * A worktree of `ref` beside this checkout, with this checkout's node_modules hard-linked in (a
 * baseline's dependencies are a subset of today's; its workspace links point into itself).
 */
function checkout(ref: string): { root: string; remove: () => void } {
  const root = mkdtempSync(join(tmpdir(), "ferry-baseline-"));
  execFileSync("git", ["worktree", "add", "--detach", "--force", root, ref], { stdio: "ignore" });
  execFileSync("cp", ["-al", "node_modules", join(root, "node_modules")]);
  return {
    root,
    remove: () => {
      execFileSync("git", ["worktree", "remove", "--force", root], { stdio: "ignore" });
      rmSync(root, { recursive: true, force: true });
    },
  };
}

type Arm = { name: string; stack: Stack };

/**
 * The receiver the traced stack exports to: a process of its own (bench/peers/otlp-sink.ts)
 * that counts what arrives without decoding it. In this process it would take its share of
 * the load generator's event loop (10-20 us of its CPU a request at 64 clients, from /proc),
 * and the traced stack would be billed for it.
 */
async function startSink(): Promise<{
  url: string;
  stats: () => Promise<{ exports: number; bytes: number }>;
  stop: () => void;
}> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ["--conditions=ferry-source", "--import", "tsx", "bench/peers/otlp-sink.ts", String(port)],
    { stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  const stats = async () =>
    (await (await fetch(`${url}/stats`)).json()) as { exports: number; bytes: number };
  await waitFor(async () => (await stats().catch(() => undefined)) !== undefined, 30_000);
  return { url, stats, stop: () => child.kill("SIGTERM") };
}

/**
 * A pause between arms: the last arm's leftovers (this process's garbage from 300,000 bodies
 * and answers, a stack's spans still exporting) otherwise land in the next arm's seconds, and
 * whichever arm went first won by ~10%.
 */
async function settle(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 1_500));
}

/**
 * Tracing off vs on, side by side: two stacks on mnist, one without OTEL_* variables (the
 * default) and one exporting every request's spans (100% sampled: no caller's traceparent, so
 * the API starts and samples every trace) to an OTLP/HTTP receiver in a process of its own that counts
 * what arrives without decoding it; with `--baseline=<ref>`, a third stack runs the code at
 * that commit (before tracing and Server-Timing, say), so that "off costs nothing" is measured
 * rather than assumed. Every stack serves the same model files (a copy of today's mnist); all
 * are up at once, measured in adjacent rounds that rotate which goes first, each round 5 s at
 * 64 closed-loop clients after a warm-up.
 */
export async function tracingBench(): Promise<Record<string, unknown>> {
  console.log(
    `tracing bench: Ferry on mnist with tracing off (no OTEL_* variables) and on (OTEL_EXPORTER_OTLP_ENDPOINT: every request traced, spans of the API and the worker exported as ${PROTOCOL} to a receiver in a process of its own that only counts them)${BASELINE ? `, and the code at ${BASELINE} (tracing off, as it was)` : ""}; every stack up at once on the same copy of mnist, ${ROUNDS} adjacent rounds rotating which goes first, each ${SECONDS} s at ${CLIENTS} closed-loop clients after a 2 s warm-up; every request a new input (no cache hits)`,
  );
  const receiver = await startSink();
  const repository = tempRepository({ mnist: {} });
  const env = { WORKER_MODELS: "mnist", MODEL_REPOSITORY: repository };
  const baseline = BASELINE ? checkout(BASELINE) : undefined;
  const arms: Arm[] = [
    { name: "off", stack: new Stack({ env }) },
    {
      name: "on",
      stack: new Stack({
        env: {
          ...env,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: PROTOCOL,
        },
      }),
    },
    ...(baseline ? [{ name: "before", stack: new Stack({ env, root: baseline.root }) }] : []),
  ];
  try {
    await Promise.all(arms.map((arm) => arm.stack.start()));
    const url = (s: Stack) => s.url("/v1/models/mnist/predict");
    for (const { stack } of arms)
      await closedLoop({
        url: url(stack),
        bodies: fresh(20_000),
        concurrency: CLIENTS,
        durationMs: 2_000,
      });
    const rounds: Array<Record<string, string | number>> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = arms.map((_, i) => arms[(i + r) % arms.length] as Arm);
      const results = new Map<string, Awaited<ReturnType<typeof closedLoop>>>();
      for (const arm of order) {
        const bodies = fresh(60_000);
        await settle();
        // untimed load on this stack first: the one measured after the other stack had run
        // lost 10-30% (an idle stack's processes shrink their heaps and go cold)
        await closedLoop({
          url: url(arm.stack),
          bodies: fresh(10_000),
          concurrency: CLIENTS,
          durationMs: 1_000,
        });
        results.set(
          arm.name,
          await closedLoop({
            url: url(arm.stack),
            bodies,
            concurrency: CLIENTS,
            durationMs: SECONDS * 1_000,
          }),
        );
      }
      const rps = (name: string) => results.get(name)?.rps ?? 0;
      const row: Record<string, string | number> = { round: r + 1, first: order[0]?.name ?? "" };
      for (const { name } of arms) row[`${name}_rps`] = rps(name);
      row.on_over_off = round(rps("on") / (rps("off") || 1), 3);
      if (baseline) row.off_over_before = round(rps("off") / (rps("before") || 1), 3);
      for (const { name } of arms) {
        row[`${name}_p50_ms`] = results.get(name)?.p50_ms ?? 0;
        row[`${name}_p99_ms`] = results.get(name)?.p99_ms ?? 0;
      }
      row.errors = [...results.values()].reduce((n, r) => n + r.errors, 0);
      rounds.push(row);
    }
    printTable(`tracing, mnist, ${CLIENTS} clients, ${SECONDS} s a round`, rounds);
    const ratio = round(median(rounds.map((r) => Number(r.on_over_off))), 3);
    const offBefore = baseline
      ? round(median(rounds.map((r) => Number(r.off_over_before))), 3)
      : undefined;
    const received = await receiver.stats();
    console.log(
      `\nthroughput with tracing on / off (median of rounds): ${ratio}${offBefore === undefined ? "" : `; off / the code at ${BASELINE}: ${offBefore}`}; the receiver took ${received.exports} exports, ${round(received.bytes / 2 ** 20, 1)} MiB`,
    );
    return {
      rounds,
      on_over_off_median: ratio,
      ...(offBefore === undefined ? {} : { baseline: BASELINE, off_over_before_median: offBefore }),
      exports: received.exports,
      bytes: received.bytes,
    };
  } finally {
    await Promise.all(arms.map((arm) => arm.stack.stop()));
    receiver.stop();
    baseline?.remove();
  }
}
