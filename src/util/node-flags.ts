/**
 * The Node.js flags files-rest's processes run with: in the `files-rest` command's first line, in
 * `npm start`, in deploy/'s systemd units, and given to the server processes of a cluster.
 *
 * `--single-threaded-gc`: V8 collects garbage on the JavaScript thread instead of handing marking,
 * scavenging and sweeping to its helper threads. An upload allocates a 64 KiB buffer per socket read,
 * so V8 collects often; on the two-core machine the benchmark runs on, the helper threads then spent
 * 1.3–2.6 s of CPU per uploaded GiB beside a 3 s main thread, and the main thread did not get
 * faster for it. With the flag, the same uploads took 0.0–0.2 s of CPU per GiB outside the main
 * thread and the main thread about the same, and 4 KiB requests cost 16–24 % less CPU (README,
 * Performance). The flag cannot be set once V8 runs (`v8.setFlagsFromString` aborts in the
 * collector), so it must be on the command line.
 */
export const NODE_FLAGS: readonly string[] = ['--single-threaded-gc'];

/** The flags of NODE_FLAGS that `execArgv` lacks. */
export function missingNodeFlags(execArgv: readonly string[]): string[] {
  return NODE_FLAGS.filter((f) => !execArgv.includes(f));
}
