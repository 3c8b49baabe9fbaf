/**
 * What Surety talks to: the client type (an ioredis \`Redis\` or \`Cluster\`) and the \`connection\`
 * option that says where Redis is.
 */
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';

export type RedisClient = Redis | Cluster;

/** A Redis Cluster seed node. */
export interface ClusterSeed {
  host: string;
  port: number;
}

/**
 * Where Redis is: a `redis://`, `rediss://` or `redis+cluster://h1:p1,h2:p2` URL; ioredis options
 * (including `tls`, `sentinels` + `name`, `username`/`password`); a URL plus ioredis options
 * (`{ url, tls: { ca } }`); Cluster seeds (`{ cluster: [{ host, port }], ...node options,
 * clusterOptions? }`); or an ioredis `Redis` or `Cluster` client (never closed by Surety).
 */
export type ConnectionOption =
  | string
  | RedisOptions
  | (RedisOptions & { url: string })
  | (RedisOptions & { cluster: ClusterSeed[]; clusterOptions?: ClusterOptions })
  | RedisClient;

export interface Logger {
  warn(message: string): void;
}
