/**
 * What the console keeps in the tab's sessionStorage: the API token (never in a URL, gone when the
 * tab closes) and the buckets opened in this tab (the list shown when the server does not list
 * buckets).
 */
const TOKEN = 'files-rest.token';
const RECENT = 'files-rest.recent-buckets';

export function loadToken(): string | null {
  return sessionStorage.getItem(TOKEN);
}

export function saveToken(token: string): void {
  sessionStorage.setItem(TOKEN, token);
}

export function forget(): void {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(RECENT);
}

export function recentBuckets(): string[] {
  try {
    const v = JSON.parse(sessionStorage.getItem(RECENT) ?? '[]') as unknown;
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

export function rememberBucket(id: string): void {
  const list = [id, ...recentBuckets().filter((x) => x !== id)].slice(0, 20);
  sessionStorage.setItem(RECENT, JSON.stringify(list));
}
