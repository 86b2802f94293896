import { OtlpReceiver } from "../test/helpers/otlp-receiver.js";
import { Stack } from "../test/helpers/stack.js";
import { uniqueBodies } from "./classifier.js";
import { closedLoop, median, round } from "./load.js";
import { printTable } from "./table.js";

const ROUNDS = 3;
const SECONDS = 5;
const CLIENTS = 64;

let sent = 5_000_000;
/** Inputs no earlier request of this bench sent: every request is a model run. */
function fresh(n: number): string[] {
  const out = uniqueBodies(n, sent);
  sent += n;
  return out;
}

/**
 * Tracing off vs on, side by side: two stacks on mnist, one without OTEL_* variables (the
 * default) and one exporting every request's spans (100% sampled: no caller's traceparent, so
 * the API starts and samples every trace) to an OTLP/HTTP receiver in this process that counts
 * what arrives without decoding it; both up at once, measured in adjacent rounds that alternate
 * which goes first, each round 5 s at 64 closed-loop clients after a warm-up.
 */
export async function tracingBench(): Promise<Record<string, unknown>> {
  console.log(
    `tracing bench: Ferry on mnist with tracing off (no OTEL_* variables) and on (OTEL_EXPORTER_OTLP_ENDPOINT: every request traced, spans of the API and the worker exported as protobuf to a receiver in this process that only counts them); both stacks up, ${ROUNDS} adjacent rounds alternating which goes first, each ${SECONDS} s at ${CLIENTS} closed-loop clients after a 2 s warm-up; every request a new input (no cache hits)`,
  );
  const receiver = await new OtlpReceiver(false).start();
  const off = new Stack({ env: { WORKER_MODELS: "mnist" } });
  const on = new Stack({
    env: {
      WORKER_MODELS: "mnist",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    },
  });
  try {
    await Promise.all([off.start(), on.start()]);
    const url = (s: Stack) => s.url("/v1/models/mnist/predict");
    for (const s of [off, on])
      await closedLoop({
        url: url(s),
        bodies: fresh(20_000),
        concurrency: CLIENTS,
        durationMs: 2_000,
      });
    const rounds: Array<Record<string, string | number>> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? [off, on] : [on, off];
      const results = new Map<Stack, Awaited<ReturnType<typeof closedLoop>>>();
      for (const s of order)
        results.set(
          s,
          await closedLoop({
            url: url(s),
            bodies: fresh(60_000),
            concurrency: CLIENTS,
            durationMs: SECONDS * 1_000,
          }),
        );
      const a = results.get(off);
      const b = results.get(on);
      rounds.push({
        round: r + 1,
        first: order[0] === off ? "off" : "on",
        off_rps: a?.rps ?? 0,
        on_rps: b?.rps ?? 0,
        on_over_off: round((b?.rps ?? 0) / (a?.rps || 1), 3),
        off_p50_ms: a?.p50_ms ?? 0,
        on_p50_ms: b?.p50_ms ?? 0,
        off_p99_ms: a?.p99_ms ?? 0,
        on_p99_ms: b?.p99_ms ?? 0,
        errors: (a?.errors ?? 0) + (b?.errors ?? 0),
      });
    }
    printTable(`tracing off vs on, mnist, ${CLIENTS} clients, ${SECONDS} s a round`, rounds);
    const ratio = round(median(rounds.map((r) => Number(r.on_over_off))), 3);
    console.log(
      `\nthroughput with tracing on / off (median of rounds): ${ratio}; the receiver took ${receiver.exports} exports, ${round(receiver.bytes / 2 ** 20, 1)} MiB`,
    );
    return { rounds, on_over_off_median: ratio, exports: receiver.exports, bytes: receiver.bytes };
  } finally {
    await Promise.all([off.stop(), on.stop()]);
    await receiver.stop();
  }
}
