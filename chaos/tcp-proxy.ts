/**
 * A loopback TCP proxy that can cut the network between clients and Redis on command, for the chaos
 * harness and the connection-loss tests. Two ways a real network fails:
 *
 * - reset(ms): every connection is destroyed with a TCP RST and new ones are accepted and destroyed at
 *   once, for `ms` (a switch reboot, a firewall dropping state, a Redis proxy restarting);
 * - blackhole(): connections stay open but no byte moves, in one direction or both (a partition, a
 *   stalled NAT, a GC-paused middlebox); heal() then delivers every held byte in order.
 *
 * It listens on 127.0.0.1 only and forwards to one loopback target: it never makes other traffic.
 */
import net from 'node:net';

export type Direction = 'both' | 'toServer' | 'toClient';

interface Pipe {
  client: net.Socket;
  server: net.Socket;
  /** Bytes held while their direction is black-holed (or before the server side connected). */
  heldToServer: Buffer[];
  heldToClient: Buffer[];
  connected: boolean;
}

export class TcpProxy {
  private readonly pipes = new Set<Pipe>();
  private refuseUntil = 0;
  private holdToServer = false;
  private holdToClient = false;

  private constructor(
    private readonly server: net.Server,
    private readonly target: { host: string; port: number },
    /** The port clients connect to (on 127.0.0.1). */
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }, port = 0): Promise<TcpProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    const proxy = new TcpProxy(server, target, (server.address() as net.AddressInfo).port);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** A redis:// URL that reaches the target through this proxy. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Connections currently open through the proxy. */
  get connections(): number {
    return this.pipes.size;
  }

  /** Bytes held by a black hole (both directions), not yet delivered. */
  get heldBytes(): number {
    let n = 0;
    for (const p of this.pipes) for (const b of [...p.heldToServer, ...p.heldToClient]) n += b.length;
    return n;
  }

  /** Destroys every connection (RST) and refuses new ones for `ms`. */
  reset(ms = 0): void {
    this.refuseUntil = Math.max(this.refuseUntil, Date.now() + ms);
    for (const pipe of [...this.pipes]) this.drop(pipe);
  }

  /** Holds every byte in `direction` from now on, keeping the connections open, until heal(). */
  blackhole(direction: Direction = 'both'): void {
    if (direction !== 'toClient') this.holdToServer = true;
    if (direction !== 'toServer') this.holdToClient = true;
  }

  /** Ends a black hole and a refusal: held bytes are delivered in order, forwarding resumes. */
  heal(): void {
    this.holdToServer = false;
    this.holdToClient = false;
    this.refuseUntil = 0;
    for (const pipe of this.pipes) this.flush(pipe);
  }

  async close(): Promise<void> {
    for (const pipe of [...this.pipes]) this.drop(pipe);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    if (Date.now() < this.refuseUntil) {
      client.on('error', () => {});
      client.resetAndDestroy();
      return;
    }
    const server = net.connect(this.target.port, this.target.host);
    const pipe: Pipe = { client, server, heldToServer: [], heldToClient: [], connected: false };
    this.pipes.add(pipe);
    client.setNoDelay(true);
    server.setNoDelay(true);
    server.on('connect', () => {
      pipe.connected = true;
      this.flush(pipe);
    });
    client.on('data', (chunk: Buffer) => {
      if (this.holdToServer || !pipe.connected || pipe.heldToServer.length > 0) pipe.heldToServer.push(chunk);
      else server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => {
      if (this.holdToClient || pipe.heldToClient.length > 0) pipe.heldToClient.push(chunk);
      else client.write(chunk);
    });
    // Either side closing or failing ends the pair, as a real connection would.
    const end = () => this.drop(pipe);
    for (const s of [client, server]) {
      s.on('error', end);
      s.on('close', end);
    }
  }

  private flush(pipe: Pipe): void {
    if (pipe.connected && !this.holdToServer) {
      for (const chunk of pipe.heldToServer.splice(0)) pipe.server.write(chunk);
    }
    if (!this.holdToClient) {
      for (const chunk of pipe.heldToClient.splice(0)) pipe.client.write(chunk);
    }
  }

  private drop(pipe: Pipe): void {
    if (!this.pipes.delete(pipe)) return;
    for (const s of [pipe.client, pipe.server]) {
      if (!s.destroyed) {
        // resetAndDestroy needs a connected socket; a socket still connecting is destroyed plainly.
        if (s.readyState === 'open') s.resetAndDestroy();
        else s.destroy();
      }
    }
  }
}
