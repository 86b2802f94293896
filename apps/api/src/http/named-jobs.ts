/**
 * The jobs a synchronous answer ran, for its `X-Job-Id`: a completion's job (and event log)
 * outlives its request for SYNC_JOB_TTL_S, and this is how a caller that only has the answer
 * (Triton's generate carries no id of Ferry's) finds it. An event stream names its jobs itself,
 * in the headers it sends before any of them ends.
 */
export class NamedJobs {
  readonly ids: string[] = [];

  add(id: string): void {
    this.ids.push(id);
  }
}
