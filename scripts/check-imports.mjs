#!/usr/bin/env node
// The layering rules of src/, checked from the source text: `node scripts/check-imports.mjs`.
//  1. No module under src/domain imports from src/http, src/tasks or src/cli (type-only imports too).
//  2. No import cycle among value imports (`import type` and `export type … from` are left out:
//     they vanish at compile time and cannot make a module load before its dependency).
// Prints what breaks a rule and exits 1, or prints a one-line summary and exits 0.
// `node scripts/check-imports.mjs DIR` checks DIR/src instead (the test uses it on a fixture).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

// The project root: the argument (a directory holding src/), or this script's project.
const root = resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname);
const src = join(root, 'src');

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

// import … from '…' / export … from '…' / import '…' / import('…'), across lines.
const STATIC = /^\s*(import|export)\s+(type\s+)?([\s\S]*?)\s+from\s+['"]([^'"]+)['"]/gm;
const BARE = /^\s*import\s+['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Local imports of one file: [{ target, typeOnly }]. */
function importsOf(file) {
  const text = readFileSync(file, 'utf8');
  const out = [];
  const add = (spec, typeOnly) => {
    if (!spec.startsWith('.')) return;
    out.push({ target: resolve(dirname(file), spec).replace(/\.js$/, '.ts'), typeOnly });
  };
  for (const m of text.matchAll(STATIC)) {
    // `import { type A, type B }` is type-only too.
    const names = m[3].replace(/^\{|\}$/g, '').split(',').map((x) => x.trim()).filter(Boolean);
    const allTypes = m[3].trim().startsWith('{') && names.length > 0 && names.every((n) => n.startsWith('type '));
    add(m[4], Boolean(m[2]) || allTypes);
  }
  for (const m of text.matchAll(BARE)) add(m[1], false);
  for (const m of text.matchAll(DYNAMIC)) add(m[1], false);
  return out;
}

const files = walk(src);
const rel = (p) => relative(root, p);
const problems = [];

for (const f of files) {
  if (!rel(f).startsWith('src/domain/')) continue;
  for (const { target } of importsOf(f)) {
    const t = rel(target);
    if (/^src\/(http|tasks|cli)\//.test(t)) problems.push(`layering: ${rel(f)} imports ${t}`);
  }
}

// Cycles: Tarjan's strongly connected components over value imports.
const known = new Set(files);
const graph = new Map(files.map((f) => [f, importsOf(f).filter((i) => !i.typeOnly && known.has(i.target)).map((i) => i.target)]));
let index = 0;
const stack = [];
const info = new Map();
const sccs = [];
function strong(v) {
  info.set(v, { index, low: index, on: true });
  index++;
  stack.push(v);
  for (const w of graph.get(v) ?? []) {
    if (!info.has(w)) {
      strong(w);
      info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
    } else if (info.get(w).on) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
  }
  if (info.get(v).low === info.get(v).index) {
    const comp = [];
    let w;
    do {
      w = stack.pop();
      info.get(w).on = false;
      comp.push(w);
    } while (w !== v);
    if (comp.length > 1 || (graph.get(v) ?? []).includes(v)) sccs.push(comp);
  }
}
for (const f of files) if (!info.has(f)) strong(f);
for (const c of sccs) problems.push(`cycle: ${c.map(rel).sort().join(' ↔ ')}`);

if (problems.length) {
  for (const p of problems) console.log(p);
  process.exit(1);
}
console.log(`imports ok: ${files.length} modules under src/, domain imports no http/tasks/cli, no value import cycle`);
