import type { Worker } from "node:worker_threads";
import { spawnThread } from "@ferry/protocol";

/** What every thread body of this package says first: it loaded, or why it did not. */
type Handshake = { type: "ready" } | { type: "load-error"; message: string };

/** A reply to one request: it carries the request's id; `error` fails that request. */
type ReplyTo = { type: string; id: number } | { type: "error"; id: number; message: string };

/**
 * The calling side of one of this package's thread bodies: the load handshake, requests
 * matched to their replies by id, every waiting request failed if the thread dies, and a
 * close that asks the thread to stop and terminates it if it does not.
 */
export class ThreadClient<Request extends { type: string }, Reply extends { type: string }> {
  private nextId = 0;
  private alive = true;
  private readonly pending = new Map<
    number,
    { resolve: (reply: Reply) => void; reject: (e: Error) => void }
  >();

  private constructor(
    private readonly thread: Worker,
    name: string,
  ) {
    thread.on("message", (msg: Reply & Partial<ReplyTo>) => {
      if (msg.id === undefined) return;
      const waiting = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if ("message" in msg && msg.type === "error") waiting?.reject(new Error(String(msg.message)));
      else waiting?.resolve(msg);
    });
    thread.on("exit", (code) => {
      this.alive = false;
      const err = new Error(`${name} thread exited with code ${code}`);
      for (const waiting of this.pending.values()) waiting.reject(err);
      this.pending.clear();
    });
  }

  /** Starts thread body `name` and waits for its handshake; the ready message is returned. */
  static async start<Req extends { type: string }, Rep extends { type: string }>(
    name: string,
    workerData: unknown,
  ): Promise<{ client: ThreadClient<Req, Rep>; ready: Extract<Rep, { type: "ready" }> }> {
    const thread = spawnThread(new URL(`./${name}.js`, import.meta.url), workerData);
    const ready = await new Promise<Extract<Rep, { type: "ready" }>>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      thread.once("error", onError);
      thread.once("message", (msg: Rep & Partial<Handshake>) => {
        thread.off("error", onError);
        if (msg.type === "ready") return resolve(msg as Extract<Rep, { type: "ready" }>);
        void thread.terminate();
        const message = msg.type === "load-error" ? msg.message : undefined;
        reject(new Error(message ?? `unexpected message from the ${name} thread`));
      });
    });
    return { client: new ThreadClient<Req, Rep>(thread, name), ready };
  }

  /** False once the thread has exited: nothing sent to it would be answered. */
  get running(): boolean {
    return this.alive;
  }

  /** Sends the request `build` makes with a fresh id; resolves with the reply to that id. */
  request(build: (id: number) => Request, transfer: ArrayBuffer[] = []): Promise<Reply> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.postMessage(build(id), transfer);
    });
  }

  /** Sends a message that has no reply. */
  send(msg: Request, transfer: ArrayBuffer[] = []): void {
    this.thread.postMessage(msg, transfer);
  }

  /** Asks the thread to stop (`closing`), and terminates it if it has not within 5 s. */
  async close(closing: Request): Promise<void> {
    if (!this.alive) return;
    await new Promise<void>((resolve) => {
      this.thread.once("exit", () => resolve());
      this.send(closing);
      // a thread stuck in a long run must not hold shutdown hostage
      setTimeout(() => void this.thread.terminate(), 5_000).unref();
    });
  }
}
