// The processor module of the sandbox stage (bench/sandbox.ts): a no-op, so the time measured is the
// per-job cost of the sandbox (messages to and from the thread or process), not the work. The same
// file serves Surety (default export) and BullMQ's sandboxed processors (default export).
export default function process(job) {
  return { n: job.data.n };
}
