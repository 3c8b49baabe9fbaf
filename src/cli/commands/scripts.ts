/**
 * `surety scripts load`: loads this version's script library (src/scripts/library.ts) into Redis, on
 * every master of a Cluster. For deployments whose worker ACL user may call the library (FCALL) but
 * not load it (docs/acl.md): an operator runs this once per Surety version, with a user that may.
 * `surety scripts prune` deletes the libraries of older versions once none of their clients runs.
 */
import type { Command } from 'commander';
import { libraryServers, loadLibraryOn, pruneLibrariesOn, scriptLibrary } from '../../scripts/functions.js';
import { examples, globals, out } from '../command-kit.js';
import { openRedis } from '../connection.js';

export function registerScripts(program: Command): void {
  const scripts = program.command('scripts').summary('the Redis Functions library of this version');
  const load = scripts
    .command('load')
    .summary('load the script library')
    .description(
      "load this version's script library into Redis (every master of a Cluster); already loaded is fine",
    )
    .action(async (_o: unknown, c: Command) => {
      const g = globals(c);
      const handle = await openRedis(g);
      const name = scriptLibrary().name;
      const rows: { server: string; library: string; result: string }[] = [];
      for (const server of libraryServers(handle.client)) {
        const result = await loadLibraryOn(server);
        rows.push({ server: `${server.options.host}:${server.options.port}`, library: name, result });
      }
      if (g.json) return out.json(rows);
      for (const r of rows)
        out.line(`${r.server}: ${r.library} ${r.result === 'loaded' ? 'loaded' : 'already loaded'}`);
    });
  examples(load, ['surety scripts load --redis redis://admin:secret@127.0.0.1:6379']);

  const prune = scripts
    .command('prune')
    .summary("delete other versions' script libraries")
    .description(
      'delete the script libraries of other Surety versions (about 1.4 MB of Redis memory each) once they no longer run; a client of such a version that still runs loads its library again',
    )
    .action(async (_o: unknown, c: Command) => {
      const g = globals(c);
      const handle = await openRedis(g);
      const rows: { server: string; deleted: string[] }[] = [];
      for (const server of libraryServers(handle.client)) {
        rows.push({
          server: `${server.options.host}:${server.options.port}`,
          deleted: await pruneLibrariesOn(server),
        });
      }
      if (g.json) return out.json(rows);
      for (const r of rows) {
        out.line(
          `${r.server}: ${r.deleted.length === 0 ? 'no other versions' : `deleted ${r.deleted.join(' ')}`}`,
        );
      }
    });
  examples(prune, ['surety scripts prune --redis redis://admin:secret@127.0.0.1:6379']);
}
