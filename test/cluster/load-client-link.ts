import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { Done } from "./load-client.js";

type Event = Record<string, unknown>;

/**
 * The cluster test's side of the load client on its own host: commands go to its stdin as
 * JSON lines, and its stdout lines (finished requests, answers to commands) are kept and
 * matched to whoever waits for them.
 */
export class LoadClientLink {
  private readonly events: Event[] = [];
  private readonly waiters: Array<{ match: (e: Event) => boolean; resolve: (e: Event) => void }> =
    [];

  constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      let event: Event;
      try {
        event = JSON.parse(line) as Event;
      } catch {
        return;
      }
      this.events.push(event);
      for (const w of [...this.waiters])
        if (w.match(event)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(event);
        }
    });
  }

  /** Resolves once `url` answers 200 from the client's host; rejects early if `exited` does. */
  async ready(url: string, exited?: Promise<never>): Promise<void> {
    const got = this.ask({ cmd: "wait", url }, (e) => e.url === url, 120_000);
    if ((await (exited ? Promise.race([got, exited]) : got)).ev !== "ready")
      throw new Error(`${url} never became ready`);
  }

  /** A metric of a /metrics page, summed over its label sets, read from the client's host. */
  async metric(url: string, name: string): Promise<number> {
    const got = this.ask({ cmd: "metric", url, name }, (e) => e.url === url && e.name === name);
    return Number((await got).value);
  }

  async start(): Promise<void> {
    await this.ask({ cmd: "start" }, (e) => e.ev === "started", 120_000);
  }

  /** Stops new requests and waits until every outstanding one has an outcome. */
  async stop(): Promise<void> {
    await this.ask({ cmd: "stop" }, (e) => e.ev === "stopped", 180_000);
  }

  /** Every request finished so far. */
  done(): Done[] {
    return this.events.filter((e): e is Done & Event => e.ev === "done");
  }

  private ask(command: Event, match: (e: Event) => boolean, timeoutMs = 30_000): Promise<Event> {
    const answer = new Promise<Event>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no answer to ${JSON.stringify(command)}`)),
        timeoutMs,
      );
      this.waiters.push({
        match: (e) => e.ev !== "done" && match(e),
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
    this.child.stdin?.write(`${JSON.stringify(command)}\n`);
    return answer;
  }
}
