/**
 * The console's pages live in the URL's fragment, so any page can be reloaded or bookmarked and the
 * server serves one file: `#/` buckets, `#/b/<bucket>?p=<folder>&q=<search>` a bucket's folder,
 * `#/o/<bucket>?k=<key>` an object's versions, `#/admin/<locations|migrations|tasks>` the admin pages.
 */
export type AdminSection = 'locations' | 'migrations' | 'tasks';
const SECTIONS: readonly AdminSection[] = ['locations', 'migrations', 'tasks'];

export type Route =
  | { page: 'buckets' }
  | { page: 'admin'; section: AdminSection }
  | { page: 'bucket'; bucket: string; prefix: string; search: string }
  | { page: 'object'; bucket: string; key: string };

export function parse(hash: string): Route {
  const h = hash.replace(/^#/, '');
  const [path = '', qs = ''] = h.split('?', 2);
  const q = new URLSearchParams(qs);
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'b' && parts[1]) return { page: 'bucket', bucket: decodeURIComponent(parts[1]), prefix: q.get('p') ?? '', search: q.get('q') ?? '' };
  if (parts[0] === 'admin') {
    const section = SECTIONS.find((x) => x === parts[1]) ?? 'locations';
    return { page: 'admin', section };
  }
  if (parts[0] === 'o' && parts[1] && q.has('k')) return { page: 'object', bucket: decodeURIComponent(parts[1]), key: q.get('k')! };
  return { page: 'buckets' };
}

export function href(r: Route): string {
  switch (r.page) {
    case 'buckets':
      return '#/';
    case 'admin':
      return `#/admin/${r.section}`;
    case 'bucket': {
      const q = new URLSearchParams();
      if (r.prefix) q.set('p', r.prefix);
      if (r.search) q.set('q', r.search);
      const s = q.toString();
      return `#/b/${encodeURIComponent(r.bucket)}${s ? `?${s}` : ''}`;
    }
    case 'object':
      return `#/o/${encodeURIComponent(r.bucket)}?${new URLSearchParams({ k: r.key })}`;
  }
}

export function go(r: Route): void {
  window.location.hash = href(r);
}
