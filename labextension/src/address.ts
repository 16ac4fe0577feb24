/**
 * Team store addresses (`postgresql://...`) as the panel shows them.
 *
 * The server refuses an address holding a password (credentials come from libpq's own
 * places), but the panel never relies on that: whatever it shows of an address has any
 * password taken out first.
 */

const SCHEME = /^postgres(?:ql)?:\/\//i;

/** Whether the store is a team store (a PostgreSQL address), not a local directory. */
export function isTeamStore(store: string | null | undefined): boolean {
  return typeof store === 'string' && SCHEME.test(store);
}

interface IParts {
  scheme: string;
  user: string;
  hosts: string;
  path: string;
  query: [string, string][];
}

function parse(url: string): IParts | null {
  const match = /^([a-z]+):\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?/i.exec(url);
  if (!match) {
    return null;
  }
  const [, scheme, authority, path, search] = match;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at) : '';
  const colon = userinfo.indexOf(':');
  const query: [string, string][] = [];
  for (const pair of (search ?? '').split('&')) {
    if (!pair) {
      continue;
    }
    const eq = pair.indexOf('=');
    const key = eq >= 0 ? pair.slice(0, eq) : pair;
    const value = eq >= 0 ? pair.slice(eq + 1) : '';
    query.push([decode(key), decode(value)]);
  }
  return {
    scheme,
    user: colon >= 0 ? userinfo.slice(0, colon) : userinfo,
    hosts: at >= 0 ? authority.slice(at + 1) : authority,
    path,
    query
  };
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** The address without a password (`user:secret@` and `password=` both go). */
export function redactAddress(url: string): string {
  if (!isTeamStore(url)) {
    return url;
  }
  const parts = parse(url);
  if (!parts) {
    return url.replace(/:[^:@/]*@/, '@');
  }
  const raw = /\?([^#]*)/.exec(url)?.[1] ?? '';
  const kept = raw
    .split('&')
    .filter(pair => pair && decode(pair.split('=')[0]).toLowerCase() !== 'password');
  const user = parts.user ? `${parts.user}@` : '';
  return `${parts.scheme}://${user}${parts.hosts}${parts.path}${kept.length ? '?' + kept.join('&') : ''}`;
}

/**
 * Where a team store is, in a few words: `host/db`, or `host:port/db` off the default port,
 * with the store's name when the database holds several (`?store=NAME`). A unix socket's
 * directory (`?host=/run/postgresql`) stands for the host. Never the user or a password.
 */
export function teamStoreWhere(url: string): string {
  const parts = parse(url);
  if (!parts) {
    return '';
  }
  const param = (name: string) => {
    const found = parts.query.filter(([key]) => key === name);
    return found.length ? found[found.length - 1][1] : '';
  };
  let hosts = decode(parts.hosts) || param('host') || 'localhost';
  const port = param('port');
  if (port && port !== '5432' && !/:\d+$/.test(hosts)) {
    hosts += `:${port}`;
  }
  const database = decode(parts.path.replace(/^\//, '')) || param('dbname');
  const store = param('store');
  const where = database ? `${hosts}/${database}` : hosts;
  return store ? `${where} (${store})` : where;
}
