/** What a model server needs to know about the job a row came in. */
export interface InferRowContext {
  /** Aborted when the job is cancelled. */
  signal: AbortSignal;
}
