/** The summary table and the JSON result file. */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Target {
  /** What the bound applies to: the figure itself or its ratio to the ceiling/reference. */
  on: 'value' | 'ratio';
  op: '>=' | '<=';
  bound: number;
}

export interface Row {
  /** Key of the figure in `figures`, e.g. `W1.mibps`. */
  id: string;
  workload: string;
  figure: string;
  unit: string;
  value: number;
  /** The ceiling (or reference) the figure is compared with, and its figure key. */
  ceiling: number | null;
  ceilingId: string | null;
  ceilingLabel: string | null;
  ratio: number | null;
  target: Target | null;
  met: boolean | null;
}

export function makeRow(
  figures: Record<string, number>,
  r: { id: string; workload: string; figure: string; unit: string; ceilingId?: string; ceilingLabel?: string; ratioId?: string; target?: Target },
): Row {
  const value = figures[r.id] ?? NaN;
  const ceiling = r.ceilingId ? figures[r.ceilingId] ?? NaN : null;
  // `ratioId`: a ratio measured pair by pair (median over repetitions of files-rest ÷ the ceiling run
  // just before it), which the machine's drift between repetitions does not skew as a ratio of medians can.
  const paired = r.ratioId !== undefined ? figures[r.ratioId] : undefined;
  const ratio = paired !== undefined && Number.isFinite(paired) ? paired : ceiling === null ? null : value / ceiling;
  let met: boolean | null = null;
  if (r.target) {
    const x = r.target.on === 'ratio' ? ratio : value;
    met = x !== null && Number.isFinite(x) ? (r.target.op === '>=' ? x >= r.target.bound : x <= r.target.bound) : false;
  }
  return {
    id: r.id,
    workload: r.workload,
    figure: r.figure,
    unit: r.unit,
    value,
    ceiling,
    ceilingId: r.ceilingId ?? null,
    ceilingLabel: r.ceilingLabel ?? null,
    ratio,
    target: r.target ?? null,
    met,
  };
}

export function fmt(x: number | null, unit = ''): string {
  if (x === null) return '';
  if (!Number.isFinite(x)) return 'n/a';
  const a = Math.abs(x);
  const s = a >= 1000 ? x.toFixed(0) : a >= 100 ? x.toFixed(1) : a >= 10 ? x.toFixed(2) : x.toFixed(3);
  return unit ? `${s} ${unit}` : s;
}

function targetText(t: Target | null, unit: string): string {
  if (!t) return '';
  const op = t.op === '>=' ? '≥' : '≤';
  return t.on === 'ratio' ? `ratio ${op} ${t.bound}` : `${op} ${t.bound} ${unit}`;
}

export function table(rows: Row[]): string {
  const head = ['Workload', 'Figure', 'Value', 'Ceiling / reference', 'Ratio', 'Target', 'Met'];
  const body = rows.map((r) => [
    r.workload,
    r.figure,
    fmt(r.value, r.unit),
    r.ceiling === null ? '' : `${fmt(r.ceiling, r.unit)} (${r.ceilingLabel ?? ''})`,
    r.ratio === null ? '' : fmt(r.ratio),
    targetText(r.target, r.unit),
    r.met === null ? '' : r.met ? 'yes' : 'NO',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)].join('\n');
}

/** Writes `<stamp>-<db>.json` and (for complete runs) `latest-<db>.json` atomically; returns the paths. */
export function writeResult(dir: string, stamp: string, db: string, result: unknown, markdown: string, latest: boolean): string[] {
  mkdirSync(dir, { recursive: true });
  const json = JSON.stringify(result, null, 2) + '\n';
  const out: string[] = [];
  const files: [string, string][] = [[`${stamp}-${db}${latest ? '' : '-partial'}.json`, json]];
  if (latest) files.push([`latest-${db}.json`, json], [`latest-${db}.md`, markdown]);
  for (const [name, text] of files) {
    const path = join(dir, name);
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, path);
    out.push(path);
  }
  return out;
}
