import { readSse } from "./sse.js";

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
