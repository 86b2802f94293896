import { Agent, request } from "node:http";
import { createParser, type EventSourceMessage } from "eventsource-parser";

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

/**
 * POSTs JSON and reads the SSE answer with node:http and eventsource-parser: a load generator
 * that shares the machine with the server under test should spend as little CPU per event as
 * it can (fetch's web streams cost several times more per chunk).
 */
export function postSse(
  url: string,
  body: unknown,
  onEvent: (event: EventSourceMessage) => void,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
        },
      },
      (res) => {
        const parser = createParser({ onEvent });
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => parser.feed(chunk));
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}
