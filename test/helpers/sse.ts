import { createParser, type EventSourceMessage } from "eventsource-parser";

/**
 * Reads an SSE response with eventsource-parser, calling `onEvent` for each event; resolves
 * when the stream ends or when `onEvent` returns "stop" (then the connection is dropped).
 */
export async function readSse(
  res: Response,
  onEvent: (event: EventSourceMessage) => "stop" | undefined,
  abort?: AbortController,
): Promise<void> {
  if (!res.body) throw new Error("no body");
  let stopped = false;
  const parser = createParser({
    onEvent: (event) => {
      if (!stopped && onEvent(event) === "stop") stopped = true;
    },
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  while (!stopped) {
    const { value, done } = await reader.read();
    if (done) return;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  abort?.abort();
  await reader.cancel().catch(() => undefined);
}

/** Reads a completion stream: its text, the id of its last chunk, and whether it said [DONE]. */
export async function readCompletion(res: Response, onChunk?: () => void) {
  let text = "";
  let lastId: string | undefined;
  let done = false;
  let error: { job?: string; message: string } | undefined;
  await readSse(res, (e) => {
    if (e.data === "[DONE]") done = true;
    else {
      const chunk = JSON.parse(e.data) as {
        choices?: Array<{ text: string }>;
        error?: { job?: string; message: string };
      };
      if (chunk.error) error = chunk.error;
      text += chunk.choices?.[0]?.text ?? "";
      if (e.id) lastId = e.id;
      onChunk?.();
    }
    return undefined;
  });
  return { text, lastId, done, error };
}
