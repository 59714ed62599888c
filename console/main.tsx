import { render } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Api, ApiError, type Bucket, type MigrationStatus, type StorageLocation, type Task, type Version } from './api.js';
import { basename, bytes, date } from './format.js';
import { go, href, parse, type AdminSection, type Route } from './router.js';
import { forget, loadToken, recentBuckets, rememberBucket, saveToken } from './session.js';
import { Uploader } from './uploader.js';

function message(e: unknown): string {
  if (e instanceof ApiError) return `${e.message} (${e.status})`;
  return e instanceof Error ? e.message : String(e);
}

/** Runs an async action, showing its failure in an alert. */
function useAction() {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (f: () => Promise<void>) => {
    setError(null);
    setBusy(true);
    try {
      await f();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  }, []);
  return { error, busy, run, setError };
}

function Alert({ text }: { text: string | null }) {
  return text ? <p class="alert" role="alert">{text}</p> : null;
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parse(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parse(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

// ---------------------------------------------------------------------------------------------
// Log in

function Login({ onLogin }: { onLogin: (token: string, canListBuckets: boolean, canAdminister: boolean) => void }) {
  const [token, setToken] = useState('');
  const { error, busy, run } = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      try {
        const { canListBuckets, canAdminister } = await new Api(token.trim() || null).checkToken();
        onLogin(token.trim(), canListBuckets, canAdminister);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) throw new Error(`The token was refused: ${err.message}`);
        throw err;
      }
    });
  };
  return (
    <main class="login">
      <h1>files-rest</h1>
      <form onSubmit={submit} aria-describedby="login-help">
        <label for="token">API token</label>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck={false} value={token} onInput={(e) => setToken(e.currentTarget.value)} />
        <p id="login-help" class="hint">Kept in this tab only (session storage); closing the tab logs you out.</p>
        <button type="submit" disabled={busy}>Log in</button>
      </form>
      <Alert text={error} />
    </main>
  );
}

// ---------------------------------------------------------------------------------------------
// Buckets

function BucketsPage({ api, canListBuckets }: { api: Api; canListBuckets: boolean }) {
  const [buckets, setBuckets] = useState<Bucket[]>([]);
  const [next, setNext] = useState<string | undefined>();
  const [open, setOpen] = useState('');
  const { error, busy, run } = useAction();

  useEffect(() => {
    if (!canListBuckets) return;
    void run(async () => {
      const page = await api.listBuckets();
      setBuckets(page.contents);
      setNext(page.links.next);
    });
  }, [api, canListBuckets]);

  const more = () =>
    run(async () => {
      const page = await api.listBuckets(next);
      setBuckets((b) => [...b, ...page.contents]);
      setNext(page.links.next);
    });
  const create = () =>
    run(async () => {
      const b = await api.createBucket();
      rememberBucket(b.id);
      go({ page: 'bucket', bucket: b.id, prefix: '', search: '' });
    });
  const openBucket = (e: Event) => {
    e.preventDefault();
    const id = open.trim();
    if (id) go({ page: 'bucket', bucket: id, prefix: '', search: '' });
  };
  const recent = recentBuckets();

  return (
    <main>
      <h1>Buckets</h1>
      <div class="toolbar">
        <button type="button" onClick={create} disabled={busy}>Create bucket</button>
        <form class="inline" onSubmit={openBucket}>
          <label for="open-bucket">Bucket id</label>
          <input id="open-bucket" value={open} onInput={(e) => setOpen(e.currentTarget.value)} spellcheck={false} />
          <button type="submit">Open</button>
        </form>
      </div>
      <Alert text={error} />
      {canListBuckets ? (
        <>
          <table aria-label="Buckets">
            <thead><tr><th scope="col">Bucket</th><th scope="col">Size</th><th scope="col">Quota</th><th scope="col">State</th></tr></thead>
            <tbody>
              {buckets.map((b) => (
                <tr key={b.id}>
                  <td><a href={href({ page: 'bucket', bucket: b.id, prefix: '', search: '' })}>{b.name ?? b.id}</a></td>
                  <td>{bytes(b.size)}</td>
                  <td>{b.quota_size === null ? 'none' : bytes(b.quota_size)}</td>
                  <td>{b.locked ? 'locked' : 'open'}{b.public_read ? ', public' : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {buckets.length === 0 && !busy ? <p>No bucket yet.</p> : null}
          {next ? <button type="button" onClick={more} disabled={busy}>More buckets</button> : null}
        </>
      ) : (
        <section aria-labelledby="recent-h">
          <h2 id="recent-h">Opened in this tab</h2>
          <p class="hint">This server does not list buckets: open one by its id.</p>
          <ul>
            {recent.map((id) => <li key={id}><a href={href({ page: 'bucket', bucket: id, prefix: '', search: '' })}>{id}</a></li>)}
          </ul>
        </section>
      )}
    </main>
  );
}

// ---------------------------------------------------------------------------------------------
// A bucket's folder

type Sort = 'name' | 'size' | 'updated';

function Breadcrumbs({ bucket, prefix, label }: { bucket: string; prefix: string; label: string }) {
  const parts = prefix.split('/').filter(Boolean);
  return (
    <nav aria-label="Breadcrumbs" class="crumbs">
      <ol>
        <li><a href={href({ page: 'buckets' })}>Buckets</a></li>
        <li><a href={href({ page: 'bucket', bucket, prefix: '', search: '' })} aria-current={parts.length === 0 ? 'page' : undefined}>{label}</a></li>
        {parts.map((p, i) => {
          const pre = `${parts.slice(0, i + 1).join('/')}/`;
          return <li key={pre}><a href={href({ page: 'bucket', bucket, prefix: pre, search: '' })} aria-current={i === parts.length - 1 ? 'page' : undefined}>{p}</a></li>;
        })}
      </ol>
    </nav>
  );
}

function BucketSummary({ b }: { b: Bucket }) {
  return (
    <dl class="summary">
      <dt>Size</dt>
      <dd>
        {b.quota_size === null ? `${bytes(b.size)} (no quota)` : `${bytes(b.size)} of ${bytes(b.quota_size)}`}
        {b.quota_size ? <meter min={0} max={b.quota_size} value={b.size} aria-label="Quota used" /> : null}
      </dd>
      <dt>State</dt>
      <dd>{b.locked ? 'Locked (read only)' : 'Open'}{b.public_read === undefined ? '' : b.public_read ? ', public read' : ', private'}</dd>
      <dt>Largest file</dt>
      <dd>{b.max_file_size === null ? 'no limit' : bytes(b.max_file_size)}</dd>
    </dl>
  );
}

function BucketPage({ api, bucket, prefix, search }: { api: Api; bucket: string; prefix: string; search: string }) {
  const [info, setInfo] = useState<Bucket | null>(null);
  const [items, setItems] = useState<Version[]>([]);
  const [next, setNext] = useState<string | undefined>();
  const [sort, setSort] = useState<Sort>('name');
  const [desc, setDesc] = useState(false);
  const [query, setQuery] = useState(search);
  const [reload, setReload] = useState(0);
  const { error, busy, run } = useAction();

  useEffect(() => setQuery(search), [search]);
  useEffect(() => {
    void run(async () => {
      const page = await api.listObjects(bucket, prefix + search);
      rememberBucket(bucket);
      setInfo(page);
      setItems(page.contents);
      setNext(page.links.next);
    });
  }, [api, bucket, prefix, search, reload]);

  const more = () =>
    run(async () => {
      const page = await api.listObjects(bucket, prefix + search, next);
      setItems((x) => [...x, ...page.contents]);
      setNext(page.links.next);
    });

  // Folders: the next `/`-segment of the keys below the folder shown.
  const { folders, files } = useMemo(() => {
    const folders = new Set<string>();
    const files: Version[] = [];
    for (const v of items) {
      if (!v.key.startsWith(prefix)) continue;
      const rest = v.key.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (slash >= 0) folders.add(rest.slice(0, slash + 1));
      else files.push(v);
    }
    const dir = desc ? -1 : 1;
    files.sort((a, b) => {
      const c = sort === 'size' ? (a.size ?? 0) - (b.size ?? 0) : sort === 'updated' ? a.updated.localeCompare(b.updated) : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      return c * dir;
    });
    const f = [...folders].sort();
    return { folders: desc && sort === 'name' ? f.reverse() : f, files };
  }, [items, prefix, sort, desc]);

  const submitSearch = (e: Event) => {
    e.preventDefault();
    go({ page: 'bucket', bucket, prefix, search: query });
  };
  const refresh = useCallback(() => setReload((n) => n + 1), []);

  return (
    <main>
      <Breadcrumbs bucket={bucket} prefix={prefix} label={info?.name ?? bucket} />
      <h1>{prefix ? prefix : 'Bucket'}</h1>
      {info ? <BucketSummary b={info} /> : null}
      <Alert text={error} />
      <div class="toolbar">
        <form role="search" class="inline" onSubmit={submitSearch}>
          <label for="search">Search by prefix</label>
          <input id="search" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} spellcheck={false} />
          <button type="submit">Search</button>
        </form>
        <label for="sort">Sort by</label>
        <select id="sort" value={sort} onChange={(e) => setSort(e.currentTarget.value as Sort)}>
          <option value="name">name</option>
          <option value="size">size</option>
          <option value="updated">modified</option>
        </select>
        <label class="check"><input type="checkbox" checked={desc} onChange={(e) => setDesc(e.currentTarget.checked)} /> descending</label>
        <button type="button" onClick={refresh}>Refresh</button>
      </div>
      <table aria-label="Objects" aria-busy={busy}>
        <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Modified</th></tr></thead>
        <tbody>
          {folders.map((f) => (
            <tr key={`d:${f}`} class="folder">
              <td><a href={href({ page: 'bucket', bucket, prefix: prefix + f, search: '' })}>{f}</a></td>
              <td>folder</td>
              <td />
            </tr>
          ))}
          {files.map((v) => (
            <tr key={v.version_id}>
              <td><a href={href({ page: 'object', bucket, key: v.key })}>{v.key.slice(prefix.length)}</a></td>
              <td>{bytes(v.size)}</td>
              <td>{date(v.updated)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!busy && folders.length === 0 && files.length === 0 ? <p>Nothing here yet.</p> : null}
      {next ? <button type="button" onClick={more} disabled={busy}>Load more</button> : null}
      <section aria-labelledby="upload-h">
        <h2 id="upload-h">Upload to {prefix || 'the bucket root'}</h2>
        {info?.locked ? <p>The bucket is locked: no upload.</p> : <Uploader api={api} bucket={bucket} prefix={prefix} onUploaded={refresh} />}
      </section>
    </main>
  );
}

// ---------------------------------------------------------------------------------------------
// An object's versions

function Confirm(props: { text: string; onYes: () => void; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (!d.open) d.showModal();
    const onCancel = () => props.onClose();
    d.addEventListener('close', onCancel);
    return () => d.removeEventListener('close', onCancel);
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-text">
      <p id="confirm-text">{props.text}</p>
      <div class="toolbar">
        <button type="button" class="danger" onClick={() => { props.onYes(); ref.current?.close(); }}>Delete permanently</button>
        <button type="button" autofocus onClick={() => ref.current?.close()}>Cancel</button>
      </div>
    </dialog>
  );
}

/** A version's integrity state: the last check's result and time, never checked, or unknown (a delete marker, an older server). */
function Integrity({ v }: { v: Version }) {
  if (v.delete_marker || v.last_check === undefined) return <span>—</span>;
  if (v.last_check === null) return <span class="check-never">never checked</span>;
  const when = v.last_check_at ? date(v.last_check_at) : '';
  return v.last_check === 'ok'
    ? <span class="check-ok">ok{when ? <>, <time dateTime={v.last_check_at!}>{when}</time></> : null}</span>
    : <strong class="check-failed">failed{when ? <>, <time dateTime={v.last_check_at!}>{when}</time></> : null}</strong>;
}

function ObjectPage({ api, bucket, objectKey }: { api: Api; bucket: string; objectKey: string }) {
  const [versions, setVersions] = useState<Version[] | null>(null);
  const [label, setLabel] = useState(bucket);
  const [reload, setReload] = useState(0);
  const [confirm, setConfirm] = useState<Version | null>(null);
  const [signed, setSigned] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const { error, busy, run } = useAction();
  const folder = objectKey.includes('/') ? objectKey.slice(0, objectKey.lastIndexOf('/') + 1) : '';

  useEffect(() => {
    void run(async () => {
      const r = await api.listVersions(bucket, objectKey);
      setVersions(r.versions);
      setLabel(r.bucket.name ?? bucket);
    });
  }, [api, bucket, objectKey, reload]);

  const head = versions?.find((v) => v.is_head);
  const done = (text: string) => {
    setStatus(text);
    setReload((n) => n + 1);
  };
  const download = (v: Version) =>
    run(async () => {
      const blob = await api.download(bucket, objectKey, v.version_id);
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = basename(objectKey);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      setStatus(`Downloading ${basename(objectKey)}.`);
    });
  const softDelete = () => run(async () => { await api.softDelete(bucket, objectKey); done('Deleted: a delete marker is now the latest version. Restore undoes it.'); });
  const restore = (marker: Version) => run(async () => { await api.hardDelete(bucket, objectKey, marker.version_id); done('Restored.'); });
  const hardDelete = (v: Version) =>
    run(async () => {
      await api.hardDelete(bucket, objectKey, v.version_id);
      if (versions && versions.length <= 1) go({ page: 'bucket', bucket, prefix: folder, search: '' });
      else done('The version was deleted permanently.');
    });
  const sign = () =>
    run(async () => {
      const link = await api.sign(bucket, objectKey);
      setSigned(link.url);
      try {
        await navigator.clipboard.writeText(link.url);
        setStatus(`Signed link copied${link.expires ? ` (valid until ${date(link.expires)})` : ''}.`);
      } catch {
        setStatus('Signed link made: copy it from the field.');
      }
    });

  return (
    <main>
      <Breadcrumbs bucket={bucket} prefix={folder} label={label} />
      <h1>{basename(objectKey)}</h1>
      <p class="key">Key: <code>{objectKey}</code></p>
      <Alert text={error} />
      {status ? <p role="status" class="status">{status}</p> : null}
      <div class="toolbar">
        {head && !head.delete_marker ? (
          <>
            <button type="button" onClick={softDelete} disabled={busy}>Delete</button>
            <button type="button" onClick={sign} disabled={busy}>Copy signed link</button>
          </>
        ) : null}
        {head?.delete_marker ? <button type="button" onClick={() => restore(head)} disabled={busy}>Restore</button> : null}
      </div>
      {signed ? (
        <p class="signed">
          <label for="signed-link">Signed link</label>
          <input id="signed-link" readOnly value={signed} onFocus={(e) => e.currentTarget.select()} />
        </p>
      ) : null}
      <h2>Versions</h2>
      <table aria-label="Versions" aria-busy={busy}>
        <thead><tr><th scope="col">Version</th><th scope="col">Size</th><th scope="col">Created</th><th scope="col">Checksum</th><th scope="col">Integrity</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(versions ?? []).map((v) => (
            <tr key={v.version_id} class={v.delete_marker ? 'marker' : ''}>
              <td>
                <code>{v.version_id.slice(0, 8)}</code>
                {v.is_head ? ' latest' : ''}
                {v.delete_marker ? ' delete marker' : ''}
              </td>
              <td>{v.delete_marker ? '—' : bytes(v.size)}</td>
              <td>{date(v.created)}</td>
              <td class="checksum">{v.checksum ?? '—'}</td>
              <td><Integrity v={v} /></td>
              <td><div class="actions">
                {v.delete_marker ? null : <button type="button" onClick={() => download(v)} aria-label={`Download version ${v.version_id.slice(0, 8)}`}>Download</button>}
                <button type="button" class="danger" onClick={() => setConfirm(v)} aria-label={`Delete version ${v.version_id.slice(0, 8)} permanently`}>Delete permanently</button>
              </div></td>
            </tr>
          ))}
        </tbody>
      </table>
      {versions && versions.length === 0 ? <p>No version of this key.</p> : null}
      {confirm ? (
        <Confirm
          text={`Delete ${confirm.delete_marker ? 'the delete marker' : 'version'} ${confirm.version_id.slice(0, 8)} of ${objectKey} permanently? This cannot be undone.`}
          onYes={() => void hardDelete(confirm)}
          onClose={() => setConfirm(null)}
        />
      ) : null}
    </main>
  );
}

// ---------------------------------------------------------------------------------------------
// Admin: locations, migrations, failed tasks (a token allowed location-update)

const SECTION_LABELS: Record<AdminSection, string> = { locations: 'Locations', migrations: 'Migrations', tasks: 'Failed tasks' };

function AdminPage({ api, section, canAdminister }: { api: Api; section: AdminSection; canAdminister: boolean }) {
  return (
    <main>
      <h1>Admin: {SECTION_LABELS[section]}</h1>
      <nav aria-label="Admin" class="tabs">
        <ul>
          {(Object.keys(SECTION_LABELS) as AdminSection[]).map((x) => (
            <li key={x}><a href={href({ page: 'admin', section: x })} aria-current={x === section ? 'page' : undefined}>{SECTION_LABELS[x]}</a></li>
          ))}
        </ul>
      </nav>
      {!canAdminister ? (
        <p class="alert" role="alert">This token may not administer: the admin pages need a token allowed the location-update action on every bucket.</p>
      ) : section === 'locations' ? <LocationsView api={api} />
        : section === 'migrations' ? <MigrationsView api={api} />
        : <TasksView api={api} />}
    </main>
  );
}

function migrationText(m: StorageLocation['migration']): string {
  if (!m) return 'none';
  const parts = [`${m.left} left`, `${m.done} done`];
  if (m.failed) parts.push(`${m.failed} failed`);
  return parts.join(', ');
}

function LocationsView({ api }: { api: Api }) {
  const [locations, setLocations] = useState<StorageLocation[] | null>(null);
  const { error, busy, run } = useAction();
  useEffect(() => {
    void run(async () => setLocations((await api.locations()).contents));
  }, [api]);
  return (
    <>
      <Alert text={error} />
      <table aria-label="Locations" aria-busy={busy}>
        <thead><tr><th scope="col">Location</th><th scope="col">Kind</th><th scope="col">Created</th><th scope="col">Holds</th><th scope="col">Migration to it</th></tr></thead>
        <tbody>
          {(locations ?? []).map((l) => (
            <tr key={l.name}>
              <td><strong>{l.name}</strong>{l.default ? ' (default)' : ''}<br /><code class="uri">{l.uri}</code></td>
              <td>{l.kind ?? 'no backend'}</td>
              <td>{date(l.created)}</td>
              <td>{l.files} {l.files === 1 ? 'file' : 'files'}, {bytes(l.bytes)}</td>
              <td>{migrationText(l.migration)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {locations && locations.length === 0 ? <p>No location.</p> : null}
    </>
  );
}

function MigrationsView({ api }: { api: Api }) {
  const [st, setSt] = useState<MigrationStatus | null>(null);
  const [reload, setReload] = useState(0);
  const { error, busy, run } = useAction();
  useEffect(() => {
    void run(async () => setSt(await api.migrations()));
  }, [api, reload]);
  return (
    <>
      <Alert text={error} />
      <div class="toolbar"><button type="button" onClick={() => setReload((n) => n + 1)} disabled={busy}>Refresh</button></div>
      {st ? (
        <dl class="summary" aria-label="All migrations">
          <dt>Files left</dt><dd>{st.queued + st.running} ({st.running} copying now)</dd>
          <dt>Moved</dt><dd>{st.done}</dd>
          <dt>Failed</dt><dd>{st.failed} {st.failed ? <a href={href({ page: 'admin', section: 'tasks' })}>see the failed tasks</a> : null}</dd>
        </dl>
      ) : null}
      <table aria-label="Migrations" aria-busy={busy}>
        <thead><tr><th scope="col">To location</th><th scope="col">Left</th><th scope="col">Copying</th><th scope="col">Done</th><th scope="col">Failed</th></tr></thead>
        <tbody>
          {(st?.targets ?? []).map((t) => (
            <tr key={t.location}><td>{t.location}</td><td>{t.left}</td><td>{t.running}</td><td>{t.done}</td><td>{t.failed}</td></tr>
          ))}
        </tbody>
      </table>
      {st && st.targets.length === 0 ? <p>No migration recorded (finished ones are forgotten after a week).</p> : null}
      <p class="hint">Start one with <code>files-rest file migrate --location NAME</code>.</p>
    </>
  );
}

function TasksView({ api }: { api: Api }) {
  const [tasks, setTasks] = useState<Task[] | null>(null);
  const [next, setNext] = useState<string | undefined>();
  const [reload, setReload] = useState(0);
  const [status, setStatus] = useState<string | null>(null);
  const { error, busy, run } = useAction();
  useEffect(() => {
    void run(async () => {
      const page = await api.tasks('failed');
      setTasks(page.contents);
      setNext(page.links.next);
    });
  }, [api, reload]);
  const more = () =>
    run(async () => {
      const page = await api.tasks('failed', next);
      setTasks((x) => [...(x ?? []), ...page.contents]);
      setNext(page.links.next);
    });
  const retry = (t: Task) =>
    run(async () => {
      setStatus(null);
      const r = await api.retryTask(t.id);
      setStatus(`Task ${r.id} (${r.name}) was queued again: ${r.state}.`);
      setReload((n) => n + 1);
    });
  const retryAll = () =>
    run(async () => {
      setStatus(null);
      const r = await api.retryFailedTasks();
      setStatus(r.queued === 1 ? '1 task was queued again.' : `${r.queued} tasks were queued again.`);
      setReload((n) => n + 1);
    });
  return (
    <>
      <Alert text={error} />
      {status ? <p role="status" class="status">{status}</p> : null}
      <div class="toolbar">
        <button type="button" onClick={() => setReload((n) => n + 1)} disabled={busy}>Refresh</button>
        {tasks && tasks.length > 0 ? <button type="button" onClick={retryAll} disabled={busy}>Retry all failed</button> : null}
      </div>
      <table aria-label="Failed tasks" aria-busy={busy}>
        <thead><tr><th scope="col">Task</th><th scope="col">Error</th><th scope="col">Failed at</th><th scope="col">Attempts</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(tasks ?? []).map((t) => {
            const first = (t.last_error ?? '').split('\n')[0] || 'no error recorded';
            return (
              <tr key={t.id}>
                <td><strong>#{t.id} {t.name}</strong>{t.summary ? <><br /><span class="hint">{t.summary}</span></> : null}</td>
                <td class="error">
                  {t.last_error && t.last_error.includes('\n') ? (
                    <details><summary>{first}</summary><pre>{t.last_error}</pre></details>
                  ) : first}
                </td>
                <td><time dateTime={t.updated}>{date(t.updated)}</time></td>
                <td>{t.attempts} of {t.max_attempts}</td>
                <td><button type="button" onClick={() => retry(t)} disabled={busy} aria-label={`Retry task ${t.id}`}>Retry</button></td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {tasks && tasks.length === 0 ? <p>No failed task.</p> : null}
      {next ? <button type="button" onClick={more} disabled={busy}>More tasks</button> : null}
    </>
  );
}

// ---------------------------------------------------------------------------------------------

function App() {
  const [token, setToken] = useState<string | null>(() => loadToken());
  const [canList, setCanList] = useState(false);
  const [canAdmin, setCanAdmin] = useState(false);
  const [checked, setChecked] = useState(false);
  const route = useRoute();
  const api = useMemo(() => (token === null ? null : new Api(token || null)), [token]);

  // A reload keeps the token (session storage): check it again and learn what the server offers.
  useEffect(() => {
    if (!api) return;
    api.checkToken().then(
      (r) => { setCanList(r.canListBuckets); setCanAdmin(r.canAdminister); setChecked(true); },
      () => { forget(); setToken(null); },
    );
  }, [api]);

  if (!api) {
    return <Login onLogin={(t, list, admin) => { saveToken(t); setCanList(list); setCanAdmin(admin); setChecked(true); setToken(t); }} />;
  }
  const logout = () => { forget(); setChecked(false); setCanAdmin(false); setToken(null); };
  return (
    <>
      <header class="top">
        <a href="#/" class="brand">files-rest</a>
        <nav aria-label="Main" class="main-nav">
          <ul>
            <li><a href="#/" aria-current={route.page === 'buckets' ? 'page' : undefined}>Buckets</a></li>
            {canAdmin ? <li><a href={href({ page: 'admin', section: 'locations' })} aria-current={route.page === 'admin' ? 'page' : undefined}>Admin</a></li> : null}
          </ul>
        </nav>
        <button type="button" onClick={logout}>Log out</button>
      </header>
      {!checked ? <p>Checking the token…</p>
        : route.page === 'bucket' ? <BucketPage api={api} bucket={route.bucket} prefix={route.prefix} search={route.search} />
        : route.page === 'object' ? <ObjectPage api={api} bucket={route.bucket} objectKey={route.key} />
        : route.page === 'admin' ? <AdminPage api={api} section={route.section} canAdminister={canAdmin} />
        : <BucketsPage api={api} canListBuckets={canList} />}
    </>
  );
}

const root = document.getElementById('app')!;
root.textContent = '';
render(<App />, root);
