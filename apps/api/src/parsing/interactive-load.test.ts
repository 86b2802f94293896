import { EventEmitter } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { spawnThread } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { InteractiveLoad, yieldToInteractive } from "./interactive-load.js";

/** A request and its response as the server's handler sees them: the response closes later. */
function request(url: string): { req: IncomingMessage; res: ServerResponse; close: () => void } {
  const res = new EventEmitter() as unknown as ServerResponse;
  return {
    req: { url } as IncomingMessage,
    res,
    close: () => (res as unknown as EventEmitter).emit("close"),
  };
}

describe("InteractiveLoad", () => {
  it("counts a request from its arrival to its response's close; uploads and batches not", () => {
    const load = new InteractiveLoad();
    const predict = request("/v1/models/digits/predict");
    const chat = request("/v1/chat/completions");
    load.watch(predict.req, predict.res);
    load.watch(chat.req, chat.res);
    for (const url of ["/v1/batches?model=mnist", "/v1/batches/b-1/results", "/v1/files"]) {
      const offline = request(url);
      load.watch(offline.req, offline.res);
    }
    expect(load.size).toBe(2);
    predict.close();
    expect(load.size).toBe(1);
    chat.close();
    expect(load.size).toBe(0);
  });

  it("yieldToInteractive returns at once with none in flight, and waits at most its bound", () => {
    const load = new InteractiveLoad();
    expect(yieldToInteractive(load.shared, 1_000)).toBeLessThan(50);
    const open = request("/v2/models/digits/infer");
    load.watch(open.req, open.res);
    const waited = yieldToInteractive(load.shared, 120);
    expect(waited).toBeGreaterThanOrEqual(110);
    expect(waited).toBeLessThan(1_000);
    expect(yieldToInteractive(load.shared, 0)).toBeLessThan(50);
  });

  it("wakes the moment the last request in flight closes on another thread", async () => {
    const load = new InteractiveLoad();
    const open = request("/v1/models/mnist/predict");
    load.watch(open.req, open.res);
    // a thread that waits, as the parse thread does, while this one closes the request later
    const thread = spawnThread(new URL("./fake-waiting-thread.js", import.meta.url), load.shared);
    const messages: number[] = [];
    const waitedFor = new Promise<number>((resolve) =>
      thread.on("message", (m: unknown) => {
        if (typeof m === "number") resolve(m);
        else messages.push(0);
      }),
    );
    while (messages.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 150));
    open.close();
    const waited = await waitedFor;
    await thread.terminate();
    expect(waited).toBeGreaterThanOrEqual(100);
    expect(waited).toBeLessThan(2_000);
  });
});
