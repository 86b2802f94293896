import { postBody } from "../bulk-http.js";

/**
 * Posts one file (argv: url, path, content type; read from disk as it is sent) when its
 * parent says "go", and sends back the answer's status and text: a process of its own, so
 * that sending tens of MB costs the measured clients' process nothing (the bench's own upload
 * had been most of its loop).
 */
const [url = "", path = "", contentType = "application/octet-stream"] = process.argv.slice(2);
process.once("message", async () => {
  const answer = await postBody(url, path, contentType).catch((err: unknown) => ({
    status: 0,
    text: String(err),
  }));
  process.send?.(answer, () => process.exit(0));
});
process.send?.("ready");
