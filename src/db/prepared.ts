import type { Compilable, CompiledQuery } from 'kysely';
import type { Executor } from './schema.js';

/**
 * The SQL texts of the queries compiled here, each with a statement name. On PostgreSQL the pool's
 * clients send these as named prepared statements (database.ts): parsed and planned once per
 * connection, then only bound and executed. The set is bounded: one text per query and dialect
 * (a listing's shapes included), never one per set of arguments.
 */
const statementNames = new Map<string, string>();

/** The prepared-statement name of a compiled query's text, or undefined for any other SQL. */
export function statementName(sql: string): string | undefined {
  return statementNames.get(sql);
}

/**
 * A query that is built and compiled once per database kind and then run with new parameters.
 *
 * Kysely builds and compiles every query anew; for the queries on the upload and download paths
 * that cost more than SQLite took to run them (about 50 µs for a version joined with its file).
 * Following Kysely's "splitting build, compile and execute" recipe, the query is built once with a
 * marker in place of each argument; each call swaps the markers in the compiled parameter list for
 * the real values and runs the compiled query on the given executor (a transaction included).
 *
 * Only for queries whose shape does not depend on the arguments: every argument must reach the
 * query as a bound parameter (once or more; no `in` lists, no optional clauses).
 */
export function prepared<A extends readonly unknown[], R>(build: (db: Executor, ...args: A) => Compilable<R>) {
  interface Plan {
    compiled: CompiledQuery<R>;
    /** For each compiled parameter: the index of the argument it takes, or -1 for a constant. */
    slots: number[];
  }
  // Keyed by the database adapter (one per dialect, shared by a database and its transactions).
  const plans = new WeakMap<object, Plan>();

  function plan(db: Executor, arity: number): Plan {
    const adapter = db.getExecutor().adapter;
    let p = plans.get(adapter);
    if (!p) {
      const markers = Array.from({ length: arity }, (_, i) => `\u0000files-rest-arg-${i}\u0000`);
      const compiled = build(db, ...(markers as unknown as A)).compile();
      const slots = compiled.parameters.map((v) => (typeof v === 'string' ? markers.indexOf(v) : -1));
      for (let i = 0; i < arity; i++) {
        if (!slots.includes(i)) throw new Error(`prepared query: argument ${i} is not a parameter of ${compiled.sql}`);
      }
      p = { compiled, slots };
      plans.set(adapter, p);
      if (!statementNames.has(compiled.sql)) statementNames.set(compiled.sql, `files_rest_${statementNames.size + 1}`);
    }
    return p;
  }

  return {
    async execute(db: Executor, ...args: A): Promise<R[]> {
      const { compiled, slots } = plan(db, args.length);
      const parameters = compiled.parameters.map((v, i) => (slots[i]! >= 0 ? args[slots[i]!] : v));
      const r = await db.executeQuery<R>({ ...compiled, parameters });
      return r.rows;
    },
    async first(db: Executor, ...args: A): Promise<R | undefined> {
      return (await this.execute(db, ...args))[0];
    },
  };
}
