/**
 * TLS for tests: a throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate,
 * made with the openssl CLI in a temp dir, and a private redis-server that listens only on a TLS port.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pingRedis } from '../../src/redis/embedded.js';
import { RedisProcess } from './redis-process.js';
import { freePort } from './redis-server.js';

export interface TlsFiles {
  dir: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  /** PEM contents, ready for ioredis's `tls` option. */
  ca: string;
  client: { cert: string; key: string };
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a server cert (SAN 127.0.0.1, ::1, localhost) and a client cert, all signed by the CA; EC P-256 keys. */
export function makeCertificates(dir: string): TlsFiles {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=Surety test CA',
  ]);
  const leaf = (name: string, cn: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(dir, [
      'req',
      '-new',
      ...ec,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${cn}`,
    ]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ]);
  };
  leaf(
    'server',
    'localhost',
    'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  leaf('client', 'surety-test-client', 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n');
  const read = (f: string) => readFileSync(join(dir, f), 'utf8');
  return {
    dir,
    caFile: join(dir, 'ca.crt'),
    serverCertFile: join(dir, 'server.crt'),
    serverKeyFile: join(dir, 'server.key'),
    ca: read('ca.crt'),
    client: { cert: read('client.crt'), key: read('client.key') },
  };
}

export interface TlsRedis {
  port: number;
  files: TlsFiles;
  /** A raw client (TLS, trusting the CA, with the client cert) for seeding and assertions. */
  redis: Redis;
  stop(): Promise<void>;
}

/**
 * A redis-server with only a TLS port (`--port 0`), in its own temp dir. `authClients: true` requires
 * a client certificate signed by the CA (mutual TLS).
 */
export async function startTlsRedis(opts: { authClients?: boolean } = {}): Promise<TlsRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'surety-tls-'));
  const files = makeCertificates(dir);
  const tls = { ca: files.ca, ...files.client };
  let port = 0;
  let proc: RedisProcess | null = null;
  for (let attempt = 1; !proc; attempt++) {
    port = await freePort();
    const candidate = new RedisProcess(`TLS redis-server on ${port}`, [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--tls-cert-file',
      files.serverCertFile,
      '--tls-key-file',
      files.serverKeyFile,
      '--tls-ca-cert-file',
      files.caFile,
      '--tls-auth-clients',
      opts.authClients ? 'yes' : 'no',
    ]);
    try {
      proc = await candidate.start(() => pingTls(port, tls));
    } catch (err) {
      // Another process took the port between freePort() and the bind: try another one.
      if (attempt >= 5 || !/already in use/i.test(String(err))) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const redis = new Redis({ host: '127.0.0.1', port, tls });
  const server = proc;
  return {
    port,
    files,
    redis,
    async stop() {
      redis.disconnect();
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pingTls(port: number, tls: { ca: string; cert: string; key: string }): Promise<boolean> {
  return pingRedis(port, '127.0.0.1', 1_000, { tls });
}
