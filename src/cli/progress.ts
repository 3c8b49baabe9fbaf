/** A one-line progress bar on stderr, drawn only when stderr is a terminal, at most 10 times a second. */
import { formatCount } from './format.js';

export class ProgressBar {
  private readonly enabled: boolean;
  private lastDraw = 0;
  private readonly started = Date.now();

  constructor(
    private readonly total: number | null,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.enabled = stream.isTTY === true;
  }

  update(done: number, items: number, force = false): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const rate = items / Math.max(0.001, (now - this.started) / 1_000);
    const stats = `${formatCount(items)} lines  ${formatCount(Math.round(rate))}/s`;
    let line = stats;
    if (this.total) {
      const ratio = Math.min(1, done / this.total);
      const width = Math.max(10, Math.min(40, (this.stream.columns ?? 80) - stats.length - 10));
      const full = Math.round(ratio * width);
      line = `[${'█'.repeat(full)}${'░'.repeat(width - full)}] ${String(Math.floor(ratio * 100)).padStart(3)}%  ${stats}`;
    }
    this.stream.write(`\r${line}\x1b[K`);
  }

  done(): void {
    if (this.enabled) this.stream.write('\r\x1b[K');
  }
}
