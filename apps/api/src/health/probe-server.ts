import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { FerryError } from "@ferry/protocol";
import { errorBody, httpStatus } from "../http/errors.js";
import { PROBE_PATHS } from "../http/probe-paths.js";

/**
 * A listener of its own for Kubernetes' probes, served by the API's own handler. libuv accepts
 * one connection per wake-up of a listening socket, which a busy event loop polls once a turn:
 * under a flood, turns of a few hundred ms, connections waiting to be accepted on the main
 * port were accepted at ~5 a second, and a probe's behind them waited past its timeout (10 s
 * in the classifier bench; a liveness probe failing that way restarts a replica that is only
 * busy). Here a probe's connection is the only one waiting, and is accepted the next turn.
 */
export function createProbeServer(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  return createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if ((req.method === "GET" || req.method === "HEAD") && PROBE_PATHS.has(path)) {
      handle(req, res);
      return;
    }
    const err = new FerryError(
      "NOT_FOUND",
      `the probe port answers GET ${[...PROBE_PATHS].join(", ")}; the API is on PORT`,
    );
    res.writeHead(httpStatus(err.code), { "content-type": "application/json" });
    res.end(JSON.stringify(errorBody(path, err)));
  });
}
