/**
 * SandboxError (ERR_SANDBOX, docs/errors.md). It lives here rather than in src/errors.ts only because
 * that file is at the 420-line limit of test/layout.test.ts; it is exported from the package like the
 * others.
 */
import { SuretyError } from '../../errors.js';

/**
 * A sandboxed processor's sandbox (worker thread or child process) failed the attempt: its module did
 * not load, or it exited, was killed or ran out of memory while running the job. The attempt fails
 * like any failure (retried with backoff); the sandbox is replaced. See docs/sandbox.md.
 */
export class SandboxError extends SuretyError {
  constructor(message: string) {
    super('ERR_SANDBOX', message);
  }
}
